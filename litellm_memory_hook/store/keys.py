"""Every Redis key name of the package, and the validation of ids that go into them.

All keys of one user carry the hash tag ``{tenant:user}``, so that they map to one Redis Cluster
slot: the pre-call read of a conversation together with the user's memories is one round trip,
and every script or transaction stays inside one slot (docs/design.md#redis-layout)::

    mem:{t:u}:c:<c>:meta       hash   conversation: raw ids, alias, namespace, seq counter,
                                      summary, cursor (extracted through seq), sver, idx_n, times,
                                      ts_unordered and truns (the time index's state)
    mem:{t:u}:c:<c>:turns      zset   score = seq, member = JSON turn, compact
                                      (core/models.py: compact_body)
    mem:{t:u}:c:<c>:calls      hash   litellm_call_id -> seq of the stored reply (idempotency);
                                      and ``:cursor``, a copy of meta's cursor (restores it
                                      when an evicting Redis dropped the meta hash)
    mem:{t:u}:c:<c>:postings   hash   recall index: term -> packed df + newest postings
    mem:{t:u}:c:<c>:times      zset   time index: score = a turn's ts (epoch ms), member = its
                                      seq (4 bytes, big-endian), for the turns that start a run
                                      of rising times (one in a conversation said in order):
                                      dates find their turns in any stored order; absent in a
                                      conversation stored before it
    mem:{t:u}:c:<c>:lease      string the extraction job's lease (worker id), with an expiry
    mem:{t:u}:c:<c>:xfail      hash   the extraction job's failures: tries, next try (epoch ms),
                                      kind, the seq it gave up at, the lines budget that fits
    mem:{t:u}:<s>:history      list   replaced and deleted memories, newest first (JSON: id,
                                      text, time, job, reason), bounded; restorable

    mem:{t:u}:<s>:pinned       hash   pinned memories, id -> text as the user typed it
    mem:{t:u}:<s>:memories     hash   extracted memories, id -> text
    mem:{t:u}:<s>:tombs        hash   deleted memories: fact hash -> deletion time (epoch ms)
    mem:{t:u}:<s>:mstate       hash   version (bumped by every change of the three above)

    mem:{t:u}:index            set    the user's conversations (``c:<c>``) and memory sets
                                      (``ns:<namespace>``): list, export and forget without KEYS
    mem:{t:u}:forgets          hash   forget tokens: ``u`` (the user) and ``c:<c>`` (one
                                      conversation) -> ``w:<random>`` (made by the first write)
                                      or ``f:<ms>-<random>`` (set by a forget), and ``n``
                                      (never deleted by a forget); a write read
                                      before a forget is refused (store/forgets.py). The one key
                                      a forget of the user leaves, for an hour past the outage
                                      buffer's age limit

where ``<s>`` is the memory scope: ``ns:<namespace>`` (``memory_scope: user``, the default:
shared by all of the user's conversations in that alias namespace) or ``c:<c>``
(``memory_scope: conversation``). Memory ids are creation-ordered (``<epoch ms, 13 digits>-<hex>``)
so a hash read back sorted by field is oldest first.

Global keys, never in a transaction with a user's keys::

    mem:due                    zset   conversation ref ``t:u:c`` -> due time (epoch ms)
    mem:stats                  hash   counters of the extraction job (jobs, failures, tokens)

Per-process metric snapshots (:mod:`litellm_memory_hook.proxy.metrics`), all under the hash tag
``{metrics}`` so that a Cluster reads them in one call (the tag has no colon, so it is never a
user's ``{tenant:user}``; the keys start with the prefix, so a SCAN of ``mem:*`` sees them)::

    mem:{metrics}:processes    zset   proxy process id -> its last publish time (epoch ms);
                                      expires 3 publish periods after the last publish
    mem:{metrics}:p:<process>  string one process's per-process metric families (JSON);
                                      expires 3 publish periods after it was written

Extraction worker heartbeats (:mod:`litellm_memory_hook.store.workers`), all under the hash tag
``{workers}`` (one Cluster slot; no colon, so never a user's tag)::

    mem:{workers}:beats        zset   worker id -> its last heartbeat (epoch ms, the worker's
                                      clock); members 30 heartbeats old are removed by the
                                      live workers' beats; expires 30 heartbeats after the last
    mem:{workers}:w:<worker>   hash   one running worker: id, kind (proxy / standalone), host,
                                      pid, started_ms, beat_ms, interval_ms, jobs_done,
                                      jobs_failed; expires 3 heartbeats after its last one, and
                                      is deleted when the worker stops cleanly

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

#: user ids that clients send when they have none; they never get memory
#: (docs/design.md#identity-and-isolation).
PLACEHOLDER_IDS = frozenset(
    {"", "default_user_id", "default", "none", "null", "undefined", "anonymous", "user", "unknown"}
)

#: the field of the user's ``forgets`` hash set by a forget of the whole user (a forget of one
#: conversation sets its index member, ``c:<c>``).
FORGET_USER_FIELD = "u"

#: suffixes of a conversation's keys and of a memory set's keys (for TTL refresh and deletion:
#: :meth:`UserKeys.keys_of`, which a forget deletes).
#: the field of a conversation's ``calls`` hash that holds a copy of its extraction cursor
#: (no ``litellm_call_id`` looks like it): an evicted meta hash gets its cursor back from it.
CURSOR_COPY_FIELD = ":cursor"

CONVERSATION_SUFFIXES = ("meta", "turns", "calls", "postings", "times", "lease", "xfail")
MEMORY_SUFFIXES = ("pinned", "memories", "tombs", "mstate", "history")


def key_id(raw: str) -> str:
    """The form of an id used inside a key: the id itself when plain, else ``h-<sha256[:24]>``.

    Raises:
        InvalidIdError: the id is empty or only white space.
    """
    if not raw or not raw.strip():
        raise InvalidIdError("empty id")
    if _PLAIN_ID.fullmatch(raw) and not raw.startswith("h-"):
        return raw
    return "h-" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:24]


_INVISIBLE = regex.compile(r"[\p{Cc}\p{Cf}\p{Z}\s]+")


def _encodable(raw: str) -> bool:
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (JSON "\\ud800"): cannot be stored
        return False
    return True


def normalize_user_id(raw: object) -> str | None:
    """The user id a request names, exactly as sent, or ``None`` when it cannot get memory.

    Injective (issue 9 item 6): two different accepted ids never share memory. A string is kept
    exactly as sent, never stripped, case-folded or normalised, so ``" victim"``,
    ``"victim\\u3000"`` and ``"victim\\u2028"`` are three users, none of them ``"victim"``
    (:func:`key_id` hashes any id with white space or other characters outside the plain set).
    Whole numbers (not booleans) are accepted as their decimal text, as some clients send numeric
    ids (``12345`` and ``"12345"`` are one user). Ids that are empty or invisible-only (white
    space, zero-width and control characters) and placeholders (:data:`PLACEHOLDER_IDS`, in any
    case, also with invisible characters around or inside them) never get memory
    (docs/design.md#identity-and-isolation), nor do ids that are not valid Unicode text (a
    lone surrogate). A long id is fine: :func:`key_id` hashes it, and the raw id kept in the
    meta hash is cut to
    :data:`litellm_memory_hook.core.bounds.META_VALUE_CHARS`.
    """
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str) or not _encodable(raw):
        return None
    visible = _INVISIBLE.sub("", raw)
    if not visible or visible.casefold() in PLACEHOLDER_IDS:
        return None
    return raw


def is_usable_user_id(raw: object) -> bool:
    """True for a user id that may get memory (see :func:`normalize_user_id`)."""
    return normalize_user_id(raw) is not None


@dataclass(frozen=True)
class UserKeys:
    """The keys of one user: the hash tag ``{tenant:user}`` and the user's index.

    ``tenant`` and ``user`` are in key form (:func:`key_id`); build from raw ids with
    :meth:`for_ids`.
    """

    prefix: str
    tenant: str
    user: str

    @classmethod
    def for_ids(cls, prefix: str, tenant: str, user: str) -> UserKeys:
        """Validate raw ids and build the keys.

        Raises:
            InvalidIdError: an id is empty.
        """
        return cls(prefix, key_id(tenant), key_id(user))

    @property
    def hash_tag(self) -> str:
        """``{tenant:user}``: every key of the user contains it, so one Cluster slot."""
        return f"{{{self.tenant}:{self.user}}}"

    @property
    def index(self) -> str:
        """Set of the user's conversations (``c:<c>``) and memory sets (``ns:<namespace>``)."""
        return f"{self.prefix}:{self.hash_tag}:index"

    @property
    def forgets(self) -> str:
        """Hash of forget tokens: ``u`` (the user) and ``c:<c>`` (one conversation) -> the token
        the first write made or the last forget set
        (:mod:`litellm_memory_hook.store.forgets`)."""
        return f"{self.prefix}:{self.hash_tag}:forgets"

    def conversation(self, conversation: str) -> ConversationKeys:
        """The keys of a conversation whose id is already in key form."""
        return ConversationKeys(self.prefix, self.tenant, self.user, conversation)

    def memory_set(self, scope: str) -> MemoryKeys:
        """The keys of a memory set; ``scope`` is ``ns:<namespace>`` or ``c:<conversation>``."""
        return MemoryKeys(self.prefix, self.tenant, self.user, scope)

    def keys_of(self, member: str) -> tuple[str, ...]:
        """Every key named by a member of the user's index (a conversation's keys include its
        conversation-scoped memory set)."""
        base = f"{self.prefix}:{self.hash_tag}:{member}"
        suffixes: tuple[str, ...] = MEMORY_SUFFIXES
        if member.startswith("c:"):
            suffixes = CONVERSATION_SUFFIXES + MEMORY_SUFFIXES
        return tuple(f"{base}:{suffix}" for suffix in suffixes)


_GLOB_SPECIAL = str.maketrans({c: "\\" + c for c in "*?[]\\"})


def user_index_match(prefix: str, tenant: str) -> str:
    """The SCAN ``MATCH`` pattern of every user index key of one tenant (key form), e.g.
    ``mem:{master:*}:index``: the users of a tenant are listed from it, never with ``KEYS``."""
    return f"{prefix.translate(_GLOB_SPECIAL)}:{{{tenant.translate(_GLOB_SPECIAL)}:*}}:index"


def user_of_index_key(prefix: str, tenant: str, key: str) -> str | None:
    """The user (key form) of a key :func:`user_index_match` matched, ``None`` for another key."""
    head, tail = f"{prefix}:{{{tenant}:", "}:index"
    if not (key.startswith(head) and key.endswith(tail)):
        return None
    user = key[len(head) : -len(tail)]
    return user if user and not any(c in user for c in "{}:") else None


def user_scope(namespace: str) -> str:
    """The memory scope shared by a user's conversations in an alias namespace."""
    return f"ns:{key_id(namespace)}"


def conversation_scope(conversation: str) -> str:
    """The memory scope of one conversation (``memory_scope: conversation``); id in key form."""
    return f"c:{conversation}"


@dataclass(frozen=True)
class ConversationKeys:
    """The key names of one conversation (ids in key form); build with :meth:`for_ids`."""

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
    def from_ref(cls, prefix: str, ref: str) -> ConversationKeys:
        """Rebuild the keys from a reference as stored in the due set (``t:u:c``).

        Raises:
            InvalidIdError: the reference is not ``t:u:c`` of key-form ids.
        """
        parts = ref.split(":")
        if len(parts) != 3 or not all(parts) or any("{" in p or "}" in p for p in parts):
            raise InvalidIdError(f"not a conversation reference: {ref!r}")
        return cls(prefix, *parts)

    @property
    def ref(self) -> str:
        """``tenant:user:conversation`` in key form: the conversation's name in the due set."""
        return f"{self.tenant}:{self.user}:{self.conversation}"

    @property
    def user_keys(self) -> UserKeys:
        """The keys of the conversation's user."""
        return UserKeys(self.prefix, self.tenant, self.user)

    @property
    def index_member(self) -> str:
        """This conversation's member in the user's index."""
        return conversation_scope(self.conversation)

    @property
    def forget_fields(self) -> tuple[str, str]:
        """The fields of the user's ``forgets`` hash that concern this conversation: the whole
        user's and its own."""
        return (FORGET_USER_FIELD, self.index_member)

    def _key(self, suffix: str) -> str:
        return f"{self.prefix}:{{{self.tenant}:{self.user}}}:c:{self.conversation}:{suffix}"

    @property
    def meta(self) -> str:
        """Hash: ids, alias, namespace, seq counter, summary, cursor, sver, timestamps."""
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
    def postings(self) -> str:
        """Hash: recall index, term -> packed document frequency and newest postings."""
        return self._key("postings")

    @property
    def times(self) -> str:
        """Sorted set: the time index, score = a stored turn's ``ts`` (epoch ms), member = its
        seq as 4 bytes, big-endian, for each turn that starts a run of rising times (meta
        ``truns``), or for every turn (an index an older version made). Kept by the same scripts
        that write and delete the turns (``store/lua/includes/time_index.lua``, read by
        ``store/lua/seq_spans.lua``)."""
        return self._key("times")

    @property
    def lease(self) -> str:
        """String: the id of the worker running this conversation's extraction job (expires)."""
        return self._key("lease")

    @property
    def extraction_failures(self) -> str:
        """Hash: the extraction job's failures (tries, next try, kind, the seq it gave up at,
        the lines budget that fits the model); deleted when a job succeeds."""
        return self._key("xfail")

    def all(self) -> tuple[str, ...]:
        """Every per-conversation key (not the memory set), for TTL refresh and deletion."""
        return (self.meta, self.turns, self.calls, self.postings, self.times, self.lease)


@dataclass(frozen=True)
class MemoryKeys:
    """The keys of one memory set: pinned and extracted memories, tombstones, version."""

    prefix: str
    tenant: str
    user: str
    scope: str

    @property
    def user_keys(self) -> UserKeys:
        """The keys of the set's user (its index, which lists the set as ``scope``)."""
        return UserKeys(self.prefix, self.tenant, self.user)

    def _key(self, suffix: str) -> str:
        return f"{self.prefix}:{{{self.tenant}:{self.user}}}:{self.scope}:{suffix}"

    @property
    def pinned(self) -> str:
        """Hash of pinned memories: id -> text exactly as the user wrote it."""
        return self._key("pinned")

    @property
    def memories(self) -> str:
        """Hash of model-extracted memories: id -> text."""
        return self._key("memories")

    @property
    def tombs(self) -> str:
        """Hash of deleted memories: fact hash -> deletion time (epoch ms)."""
        return self._key("tombs")

    @property
    def state(self) -> str:
        """Hash with ``version``, bumped by every change of the memory set."""
        return self._key("mstate")

    @property
    def history(self) -> str:
        """List of replaced and deleted memories, newest first (JSON objects), bounded."""
        return self._key("history")

    def all(self) -> tuple[str, ...]:
        """Every key of the memory set."""
        return (self.pinned, self.memories, self.tombs, self.state)


def due_key(prefix: str) -> str:
    """``mem:due``: sorted set of conversation refs scored by due time (epoch ms)."""
    return f"{prefix}:due"


def stats_key(prefix: str) -> str:
    """``mem:stats``: hash of extraction counters (readable with ``HGETALL``)."""
    return f"{prefix}:stats"


def sweep_key(prefix: str) -> str:
    """``mem:sweep``: the lease of the worker sweeping for lagging conversations (expires)."""
    return f"{prefix}:sweep"


#: the hash tag of the per-process metric snapshots (one Cluster slot for all of them).
METRICS_TAG = "{metrics}"


def metrics_index_key(prefix: str) -> str:
    """``mem:{metrics}:processes``: sorted set of proxy process ids scored by their last
    metrics publish (epoch ms), so a scrape finds the live ones without SCAN."""
    return f"{prefix}:{METRICS_TAG}:processes"


def metrics_snapshot_key(prefix: str, process: str) -> str:
    """``mem:{metrics}:p:<process>``: one proxy process's metric snapshot (JSON string)."""
    return f"{prefix}:{METRICS_TAG}:p:{process}"


#: the hash tag of the extraction workers' heartbeats (one Cluster slot for all of them).
WORKERS_TAG = "{workers}"


def workers_index_key(prefix: str) -> str:
    """``mem:{workers}:beats``: sorted set of extraction worker ids scored by their last
    heartbeat (epoch ms), so a reader finds the workers without SCAN."""
    return f"{prefix}:{WORKERS_TAG}:beats"


def worker_beat_key(prefix: str, worker: str) -> str:
    """``mem:{workers}:w:<worker>``: one extraction worker's heartbeat (hash, expiring)."""
    return f"{prefix}:{WORKERS_TAG}:w:{worker}"


#: the forms of a tenant id (the first part of every conversation's hash tag).
TENANT_FORMS = (
    "'master', 'team-<team id>', 'user-<user id>', 'alias-<key alias>' or 'key-<24 hex digits>'"
)
_KEY_TENANT = frozenset("0123456789abcdef")


def is_tenant(value: object) -> bool:
    """True for a tenant id of one of :data:`TENANT_FORMS` (a typo'd ``--tenant`` would
    otherwise write memory that no key can reach)."""
    if not isinstance(value, str):
        return False
    if value == "master":
        return True
    for form in ("team-", "user-", "alias-"):
        if value.startswith(form) and value[len(form) :]:
            return True
    digits = value[4:]
    return value.startswith("key-") and len(digits) == 24 and set(digits) <= _KEY_TENANT
