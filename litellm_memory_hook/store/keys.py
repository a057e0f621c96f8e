"""Every Redis key name of the package, and the validation of ids that go into them.

Per-conversation keys share one hash tag, ``{tenant:user:conversation}``, so that all of them map
to one Redis Cluster slot and MULTI/EXEC and Lua work on a cluster::

    mem:{t:u:c}:meta       hash   ids, seq counter, summary, cursor, version, timestamps
    mem:{t:u:c}:turns      zset   score = seq, member = JSON turn
    mem:{t:u:c}:calls      hash   litellm_call_id -> seq of the stored reply (idempotency)
    mem:{t:u:c}:memories   hash   model-extracted facts
    mem:{t:u:c}:pinned     hash   user-written facts (id -> text)
    mem:{t:u:c}:postings   hash   recall index: term -> packed df + newest postings

Global keys, never used in the same transaction as a conversation's keys::

    mem:due                zset   conversation tag -> due time for extraction (epoch ms)
    mem:user:{t:u}         set    the user's conversation tags (list / forget without KEYS)

Ids made of ``[A-Za-z0-9_.@-]`` (1-64 characters) are used as they are, so keys stay readable in
redis-cli; any other id (braces, colons, spaces, other scripts, longer) is replaced by
``h-`` + the first 24 hex digits of its SHA-256, and the raw id is kept in the meta hash.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import regex

from litellm_memory_hook.errors import InvalidIdError

_PLAIN_ID = regex.compile(r"^[A-Za-z0-9_.@-]{1,64}$")

#: user ids that clients send when they have none; they never get memory (DESIGN.md section 3).
PLACEHOLDER_IDS = frozenset(
    {"", "default_user_id", "default", "none", "null", "undefined", "anonymous", "user", "unknown"}
)


def key_id(raw: str) -> str:
    """The form of an id used inside a key: the id itself when plain, else ``h-<sha256[:24]>``.

    Raises:
        InvalidIdError: the id is empty or only white space.
    """
    if not raw or not raw.strip():
        raise InvalidIdError("empty id")
    if _PLAIN_ID.fullmatch(raw) and not raw.startswith("h-"):
        return raw
    return "h-" + hashlib.sha256(raw.encode("utf-8")).hexdigest()[:24]


_INVISIBLE = regex.compile(r"[\p{Cc}\p{Cf}\p{Z}\s]+")


def normalize_user_id(raw: object) -> str | None:
    """The user id a request names, or ``None`` when it cannot get memory.

    Strings are stripped; whole numbers (not booleans) are accepted as their decimal text, as
    some clients send numeric ids. Empty, invisible-only (white space, zero-width characters)
    and placeholder ids (:data:`PLACEHOLDER_IDS`) never get memory (DESIGN.md section 3).
    """
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str):
        return None
    value = raw.strip()
    if not _INVISIBLE.sub("", value) or value.lower() in PLACEHOLDER_IDS:
        return None
    return value


def is_usable_user_id(raw: object) -> bool:
    """True for a user id that may get memory (see :func:`normalize_user_id`)."""
    return normalize_user_id(raw) is not None


@dataclass(frozen=True)
class ConversationKeys:
    """The key names of one conversation.

    Build it with :meth:`for_ids`; ``tag`` is the hash tag content ``t:u:c`` (ids already in key
    form).
    """

    prefix: str
    tenant: str
    user: str
    conversation: str

    @classmethod
    def for_ids(cls, prefix: str, tenant: str, user: str, conversation: str) -> ConversationKeys:
        """Validate raw ids and build the key names.

        Raises:
            InvalidIdError: an id is empty.
        """
        return cls(prefix, key_id(tenant), key_id(user), key_id(conversation))

    @classmethod
    def from_tag(cls, prefix: str, tag: str) -> ConversationKeys:
        """Rebuild the keys from a tag as stored in the due set or the user index.

        Raises:
            InvalidIdError: the tag is not ``t:u:c``.
        """
        parts = tag.split(":")
        if len(parts) != 3 or not all(parts):
            raise InvalidIdError(f"not a conversation tag: {tag!r}")
        return cls(prefix, *parts)

    @property
    def tag(self) -> str:
        """``tenant:user:conversation`` in key form."""
        return f"{self.tenant}:{self.user}:{self.conversation}"

    def _key(self, suffix: str) -> str:
        return f"{self.prefix}:{{{self.tag}}}:{suffix}"

    @property
    def meta(self) -> str:
        """Hash: ids, seq counter, summary, cursor, version, timestamps."""
        return self._key("meta")

    @property
    def turns(self) -> str:
        """Sorted set of JSON turns scored by seq."""
        return self._key("turns")

    @property
    def calls(self) -> str:
        """Hash of litellm_call_id -> seq, for idempotent appends."""
        return self._key("calls")

    @property
    def memories(self) -> str:
        """Hash of model-extracted facts."""
        return self._key("memories")

    @property
    def pinned(self) -> str:
        """Hash of user-written facts."""
        return self._key("pinned")

    @property
    def postings(self) -> str:
        """Hash: recall index, term -> packed document frequency and newest postings."""
        return self._key("postings")

    def all(self) -> tuple[str, ...]:
        """Every per-conversation key, for TTL refresh and deletion."""
        return (self.meta, self.turns, self.calls, self.memories, self.pinned, self.postings)

    def user_index(self) -> str:
        """The global set of this user's conversation tags."""
        return user_index_key(self.prefix, self.tenant, self.user)


def user_index_key(prefix: str, tenant: str, user: str) -> str:
    """``mem:user:{t:u}``: set of the user's conversation tags (ids in key form)."""
    return f"{prefix}:user:{{{tenant}:{user}}}"


def due_key(prefix: str) -> str:
    """``mem:due``: sorted set of conversation tags scored by due time (epoch ms)."""
    return f"{prefix}:due"
