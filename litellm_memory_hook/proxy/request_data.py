"""What the hook reads and writes in LiteLLM's request data: the record it leaves for the
post-call hooks (under :data:`METADATA_KEY` of the request's metadata), a client's copy of what
only the hook writes (removed), the debug header, and the content part types LiteLLM accepts.

LiteLLM keeps the proxy's metadata in ``metadata`` or ``litellm_metadata`` by route
(:func:`litellm_memory_hook.protocols.base.metadata_dicts`); what the pre-call hook writes there
is visible in the post-call hooks (docs/design.md, facts about LiteLLM).
"""

from __future__ import annotations

from typing import Any, Final

from litellm_memory_hook.protocols import responses
from litellm_memory_hook.protocols.base import metadata_dicts
from litellm_memory_hook.proxy.identity import request_headers
from litellm_memory_hook.proxy.outcomes import OUTCOME_KEY

#: where the pre-call hook leaves the signed record (:mod:`litellm_memory_hook.engine.record`).
METADATA_KEY: Final = "litellm_memory"

#: the request header that asks for ``x-memory-hook-ms`` and ``x-memory-layers``.
DEBUG_HEADER: Final = "x-memory-debug"


def _user_part_types() -> frozenset[str] | None:
    """The content part types LiteLLM accepts in a user message: it answers 400 to any other,
    naming the message's index, so a request holding one is passed through as the client sent
    it (the index is then the client's). ``None`` (any type) for a LiteLLM without the list."""
    try:
        from litellm.types.llms.openai import ValidUserMessageContentTypes
    except ImportError:  # pragma: no cover - depends on the installed LiteLLM
        return None
    return frozenset(ValidUserMessageContentTypes)


#: :func:`_user_part_types`, read once.
USER_PART_TYPES = _user_part_types()


def request_metadata(data: dict[str, Any]) -> dict[str, Any]:
    """The request's ``metadata`` dict (made when missing)."""
    metadata = data.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
        data["metadata"] = metadata
    return metadata


def drop_client_record(data: dict[str, Any]) -> None:
    """Remove what only the hook writes (its record, outcome, echo) from a client's request
    metadata, LiteLLM's copy of the client's own included."""
    for metadata in metadata_dicts(data):
        requester = metadata.get("requester_metadata")
        for target in (metadata, requester) if isinstance(requester, dict) else (metadata,):
            for key in (METADATA_KEY, OUTCOME_KEY, responses.ECHO_KEY):
                target.pop(key, None)


def raw_record(data: object) -> object:
    """The record in the request's metadata as found (either LiteLLM field), unchecked."""
    return next(
        (m[METADATA_KEY] for m in metadata_dicts(data) if m.get(METADATA_KEY) is not None),
        None,
    )


def debug_requested(data: object, headers: dict[str, str] | None) -> bool:
    """True when the request carried the debug header: in the response-headers hook's
    ``headers``, or in either LiteLLM metadata field."""
    if {k.lower(): v for k, v in (headers or {}).items()}.get(DEBUG_HEADER):
        return True
    return any(
        request_headers({"metadata": metadata}).get(DEBUG_HEADER)
        for metadata in metadata_dicts(data)
    )
