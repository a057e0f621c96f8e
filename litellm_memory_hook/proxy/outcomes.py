"""Why memory was or was not used for a request: one value per reason, sent to the client as
the ``x-memory-outcome`` response header on every response of a memory-enabled alias and
counted as ``outcome_<value>`` in the hook's counters (``litellm_memory_hook_events_total``).

The pre-call hook leaves the value in the request's LiteLLM metadata under
:data:`OUTCOME_KEY` (a client's own value there is removed first); the response-headers hook
reads it. Values:

* ``used``: memory was read from Redis and the turn is stored.
* ``read_only``: memory was read; nothing is stored (the alias's or the request's mode).
* ``temporary``: a temporary chat (``requests.temporary_conversation_patterns``): read, not stored.
* ``off``: the request asked for no memory (``metadata.memory_mode: off``).
* ``no_user``: no usable user id (send the OpenAI ``user`` field, Anthropic's
  ``metadata.user_id``, or the configured user header).
* ``no_tenant``: the caller's key has no team, user or key id.
* ``side_request``: a frontend's own request (a title, tags, a summary): may read, never writes.
* ``no_new_turn``: the request holds no new user turn (nothing to rebuild).
* ``redis_down``: Redis failed or its breaker is open: the request went on with what it
  carried, and its turn waits in the outage buffer.
* ``invalid_request``: a request the hook does not read (the proxy judges it as sent).
* ``too_large``: the client's own messages and the reply fill the model's declared window
  (``max_input_tokens``): nothing is added, nothing stored.
* ``extraction``: an extraction job's own call through the proxy.
* ``config_error``: the alias's memory configuration is invalid (said in the proxy's log).
* ``error``: the hook failed; the request went on as the client sent it (said in the log).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

from litellm_memory_hook.protocols.base import metadata_dicts

#: the response header.
OUTCOME_HEADER: Final = "x-memory-outcome"

#: where the pre-call hook leaves the outcome in the request's LiteLLM metadata.
OUTCOME_KEY: Final = "litellm_memory_outcome"

OUTCOMES: Final = frozenset(
    {
        "used",
        "read_only",
        "temporary",
        "off",
        "no_user",
        "no_tenant",
        "side_request",
        "no_new_turn",
        "redis_down",
        "invalid_request",
        "too_large",
        "extraction",
        "config_error",
        "error",
    }
)


def set_outcome(metadata: Any, outcome: str) -> None:
    """Leave ``outcome`` (one of :data:`OUTCOMES`) in a request's metadata dict (no-op when the
    metadata is not a dict)."""
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown memory outcome {outcome!r}")
    if isinstance(metadata, dict):
        metadata[OUTCOME_KEY] = outcome


def note_outcome(counters: Counter[str], data: dict[str, Any], field: str, outcome: str) -> None:
    """Count ``outcome`` (``outcome_<value>``) and leave it in the request's metadata dict
    ``data[field]`` (made when missing) for the ``x-memory-outcome`` header."""
    counters[f"outcome_{outcome}"] += 1
    metadata = data.get(field)
    if not isinstance(metadata, dict):
        metadata = data[field] = {}
    set_outcome(metadata, outcome)


def read_outcome(data: Any) -> str | None:
    """The outcome the pre-call hook left in ``data``'s metadata (either LiteLLM field)."""
    for metadata in metadata_dicts(data):
        value = metadata.get(OUTCOME_KEY)
        if isinstance(value, str) and value in OUTCOMES:
            return value
    return None
