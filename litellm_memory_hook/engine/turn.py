"""What the engine is asked to do for one request, and what it answers: the turn to rebuild
(:class:`TurnRequest`, whose :class:`~.identity.Identity` says whose it is) and the rebuilt
request (:class:`Rebuilt`).

The engine speaks chat completions: a request's ``messages`` are chat-completions messages
(a protocol adapter makes them from another API: :mod:`litellm_memory_hook.protocols`).
Budgets are characters and messages, times milliseconds (docs/design.md, request flow).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from litellm_memory_hook.core.model_window import ModelLimit
from litellm_memory_hook.engine.identity import Identity
from litellm_memory_hook.engine.options import ContextOptions
from litellm_memory_hook.engine.rebuild import PreparedRequest


@dataclass(frozen=True)
class TurnRequest:
    """One request's turn, as the pre-call step decided it before reading Redis.

    Attributes:
        model: the model alias the request names (said in log lines).
        messages: the request's messages as the client sent them (chat completions).
        who: whose conversation and memories.
        options: the rebuild's knobs (budgets, layout, the request's controls).
        limit: the model's declared window (``None``: none declared).
        call_id: LiteLLM's call id (writes are idempotent on it).
        mode: ``read_write`` (the turn is stored) or ``read_only``.
        temporary: a temporary chat (read, never stored).
        flush: extraction is due at once after this turn.
        extract: the alias extracts memories.
        started: ``time.perf_counter()`` when the pre-call step started (seconds).
        protocol: the client API's adapter name.
        previous_reply: the ``calls`` hash field of a stored reply this request continues (a
            Responses API ``previous_response_id``), looked up before the read; ``None``: none.
    """

    model: str
    messages: object
    who: Identity
    options: ContextOptions
    limit: ModelLimit | None
    call_id: str
    mode: Literal["read_write", "read_only"]
    temporary: bool
    flush: bool
    extract: bool
    started: float
    protocol: str
    previous_reply: str | None = None


#: why a rebuilt request has or lacks memory (a subset of the proxy's outcomes).
RebuildOutcome = Literal["used", "read_only", "temporary", "redis_down", "no_new_turn", "too_large"]


@dataclass(frozen=True)
class Rebuilt:
    """The engine's answer for one request.

    Attributes:
        outcome: what memory did (the ``x-memory-outcome`` values of the same names).
        messages: the messages to send; ``None``: the client's own, with the alias's rules.
        record: the signed record to leave for the post-call step (``None``: nothing to
            store or show).
        prepared: the rebuild from Redis (``None``: Redis was not read).
        elapsed_ms: the pre-call step's time (milliseconds).
        skipped: Redis was not tried (its breaker is open).
        reply_known: whether :attr:`TurnRequest.previous_reply` is stored (``None``: not
            looked up).
    """

    outcome: RebuildOutcome
    messages: list[dict[str, Any]] | None = None
    record: dict[str, Any] | None = None
    prepared: PreparedRequest | None = None
    elapsed_ms: float = 0.0
    skipped: bool = False
    reply_known: bool | None = None
