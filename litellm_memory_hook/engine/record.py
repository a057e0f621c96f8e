"""The record that crosses the model call: what the pre-call step decided to store, read back
by the post-call step (:class:`TurnRecord`, version :data:`RECORD_VERSION`).

It travels in the request's LiteLLM metadata as a plain dict (its *wire* form: JSON values
only, a few hundred bytes), which clients can also write, so it is signed: HMAC-SHA256 under a
random key of the process (:class:`RecordSigner`). A record this process did not sign is never
read. The turns to store do not travel in it: they stay in the process
(:mod:`.held_turns`), named by the record's ``held`` token. Why it is signed:
docs/security.md#what-a-client-cannot-do.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from litellm_memory_hook.errors import MemoryHookError
from litellm_memory_hook.store.keys import ConversationKeys

#: the wire form's version (its ``v``); a record of another version is not read.
RECORD_VERSION: Final = 1


class RecordError(MemoryHookError):
    """A signed record that cannot be read (another version, a field missing)."""


@dataclass(frozen=True)
class TurnRecord:
    """What the post-call step stores for one request, and what the debug headers show.

    Attributes:
        protocol: the client API's adapter name (:mod:`litellm_memory_hook.protocols`).
        prefix: the key prefix of the conversation.
        ref: the conversation's ref (:meth:`ConversationKeys.from_ref`).
        meta: the raw ids kept in the conversation's meta hash at its first write.
        memory_scope: the scope of the memory set the turn's words are indexed in.
        flush: extraction is due at once after this turn (``metadata.memory_flush``).
        extract: the alias extracts memories at all.
        write: the turn is stored (``False``: read-only, temporary, or a plan that stores
            nothing).
        held: the token of the turns held in the process (:mod:`.held_turns`).
        previous: the text said before the first turn to store (its context terms).
        seeded: how many of the turns are a seeding client's older history.
        prefill: the assistant text the request ended with (the reply continues it).
        prefill_name: the ``name`` of that prefill message.
        cursor: the conversation's extraction cursor as the pre-call step read it (seq).
        forget_token: the forget tokens the read found (``@<epoch ms>``: none read, Redis was
            down), which the write is checked against.
        hook_ms: the pre-call step's time (milliseconds).
        layers: characters per layer of what the model received.
    """

    protocol: str
    prefix: str
    ref: str
    meta: Mapping[str, str]
    memory_scope: str
    flush: bool
    extract: bool
    write: bool
    held: str
    previous: str = ""
    seeded: int = 0
    prefill: str = ""
    prefill_name: str = ""
    cursor: int = 0
    forget_token: str = ""
    hook_ms: float = 0.0
    layers: Mapping[str, int] = field(default_factory=dict)

    @property
    def conversation(self) -> tuple[str, str]:
        """``(prefix, ref)`` of the conversation."""
        return self.prefix, self.ref

    @property
    def keys(self) -> ConversationKeys:
        """The conversation's keys."""
        return ConversationKeys.from_ref(self.prefix, self.ref)

    def wire(self) -> dict[str, Any]:
        """The wire form (unsigned): JSON values, the short names of version 1."""
        return {
            "v": RECORD_VERSION,
            "proto": self.protocol,
            "prefix": self.prefix,
            "ref": self.ref,
            "meta": dict(self.meta),
            "mscope": self.memory_scope,
            "flush": self.flush,
            "extract": self.extract,
            "write": self.write,
            "held": self.held,
            "previous": self.previous,
            "seeded": self.seeded,
            "prefill": self.prefill,
            "prefill_name": self.prefill_name,
            "cursor": self.cursor,
            "forgets": self.forget_token,
            "hook_ms": self.hook_ms,
            "layers": dict(self.layers),
        }

    @classmethod
    def from_wire(cls, raw: Mapping[str, Any]) -> TurnRecord:
        """The record of a wire form :meth:`wire` made.

        Raises:
            RecordError: another version, or a field missing.
        """
        if raw.get("v") != RECORD_VERSION:
            raise RecordError(f"a memory record of version {raw.get('v')!r}, not {RECORD_VERSION}")
        try:
            return cls(
                protocol=str(raw["proto"]),
                prefix=str(raw["prefix"]),
                ref=str(raw["ref"]),
                meta={str(k): str(v) for k, v in raw["meta"].items()},
                memory_scope=str(raw["mscope"]),
                flush=bool(raw["flush"]),
                extract=bool(raw["extract"]),
                write=bool(raw["write"]),
                held=str(raw["held"]),
                previous=str(raw["previous"]),
                seeded=int(raw["seeded"]),
                prefill=str(raw["prefill"]),
                prefill_name=str(raw["prefill_name"]),
                cursor=int(raw["cursor"]),
                forget_token=str(raw["forgets"]),
                hook_ms=float(raw["hook_ms"]),
                layers={str(k): int(v) for k, v in raw["layers"].items()},
            )
        except (KeyError, AttributeError, TypeError, ValueError) as exc:
            raise RecordError(f"an unreadable memory record: {exc!r}") from exc


class RecordSigner:
    """Signs records and checks them, under a random key of its own (one per process).

    Args:
        secret: the key (default: 32 random bytes).
    """

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret if secret is not None else secrets.token_bytes(32)

    def sign(self, wire: Mapping[str, Any]) -> str:
        """HMAC-SHA256 (hex) of a wire form, its ``sig`` left out.

        Serialised with orjson (sorted keys; ~3x faster than :mod:`json`, and it runs for
        every request in pre-call and again in post-call); a value orjson refuses (a set, an
        integer over 64 bits) falls back to :mod:`json`. Sign and check go through the same
        path for the same record, so only this signer's own checks compare them.
        """
        unsigned = {k: v for k, v in wire.items() if k != "sig"}
        try:
            body = orjson.dumps(unsigned, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            body = json.dumps(
                unsigned, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=list
            ).encode("utf-8")
        return hmac.new(self._secret, body, hashlib.sha256).hexdigest()

    def seal(self, record: TurnRecord) -> dict[str, Any]:
        """The signed wire form of ``record`` (its ``sig`` added)."""
        wire = record.wire()
        wire["sig"] = self.sign(wire)
        return wire

    def genuine(self, raw: object) -> bool:
        """True when ``raw`` is a wire form this signer signed, unchanged."""
        if not isinstance(raw, dict):
            return False
        # as bytes: compare_digest refuses a str with non-ASCII characters (a forged "sig")
        given = str(raw.get("sig", "")).encode("utf-8", "surrogatepass")
        return hmac.compare_digest(given, self.sign(raw).encode())
