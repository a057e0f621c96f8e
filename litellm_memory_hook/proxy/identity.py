"""Who a request belongs to: tenant, user and conversation.

* tenant: from LiteLLM auth only (``UserAPIKeyAuth``): ``team-<team_id>``, else
  ``user-<user_id>`` (unless a placeholder), else ``key-<24 hex of SHA-256 of LiteLLM's key
  token>``; the master key is the tenant ``master``. Never from the request body. An
  authentication with none of these (a ``custom_auth`` returning a bare ``UserAPIKeyAuth()``)
  has no tenant: such a caller gets no memory, rather than sharing one with every other such
  caller and the master key.
* user: the request's ``user`` field, else the configured header; placeholders never get memory.
* conversation: ``metadata.conversation_id``, else the ``x-litellm-session-id`` header, else the
  alias namespace (one default conversation per user and namespace). An explicit conversation id
  is shared by every alias the app sends it with.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from litellm_memory_hook.store.keys import (
    ConversationKeys,
    MemoryKeys,
    conversation_scope,
    is_usable_user_id,
    normalize_user_id,
    user_scope,
)

MASTER_KEY_TOKEN = "litellm_proxy_master_key"
SESSION_HEADER = "x-litellm-session-id"


@dataclass(frozen=True)
class Identity:
    """The raw ids of a request, its conversation's keys and its memory set's keys."""

    tenant: str
    user: str
    conversation: str
    namespace: str
    keys: ConversationKeys
    memory: MemoryKeys
    alias: str = ""

    def meta_fields(self) -> dict[str, str]:
        """Raw ids kept in the conversation's meta hash (set once, on the first write): the
        extraction worker reads the alias and the memory scope from there."""
        return {
            "tenant": self.tenant,
            "user": self.user,
            "conversation": self.conversation,
            "namespace": self.namespace,
            "alias": self.alias,
            "mscope": self.memory.scope,
        }


#: the forms :func:`tenant_from_auth` gives: no other tenant can own a key.
TENANT_FORMS = "'master', 'team-<team id>', 'user-<user id>' or 'key-<24 hex digits>'"
_KEY_TENANT = frozenset("0123456789abcdef")


def is_tenant(value: object) -> bool:
    """True for a tenant id of one of :data:`TENANT_FORMS` (a typo'd ``--tenant`` would
    otherwise write memory that no key can reach)."""
    if not isinstance(value, str):
        return False
    if value == "master":
        return True
    for form in ("team-", "user-"):
        if value.startswith(form) and value[len(form) :]:
            return True
    digits = value[4:]
    return value.startswith("key-") and len(digits) == 24 and set(digits) <= _KEY_TENANT


def tenant_from_auth(auth: object) -> str | None:
    """The tenant id for a ``UserAPIKeyAuth`` (or any object with the same attributes), or
    ``None`` when it carries no team, no usable user id and no key: a caller without identity
    has no tenant (and so no memory). The master key is the tenant ``master``."""
    team_id = getattr(auth, "team_id", None)
    if isinstance(team_id, str) and team_id:
        return f"team-{team_id}"
    user_id = getattr(auth, "user_id", None)
    if is_usable_user_id(user_id):
        return f"user-{user_id}"
    token = getattr(auth, "token", None) or getattr(auth, "api_key", None)
    if token == MASTER_KEY_TOKEN:
        return "master"
    if not isinstance(token, str) or not token.strip():
        return None
    # LiteLLM's token is a key hash for sk- keys, but "hashed-jwt-<sha>" for JWTs and the raw
    # key for custom auth: hash it again, so tenants never collide and no key text is stored.
    return "key-" + hashlib.sha256(token.encode("utf-8")).hexdigest()[:24]


def request_headers(data: Mapping[str, Any]) -> dict[str, str]:
    """The request headers LiteLLM copied into ``metadata.headers`` (lower-case names)."""
    metadata = data.get("metadata")
    headers = metadata.get("headers") if isinstance(metadata, dict) else None
    if not isinstance(headers, dict):
        return {}
    return {str(k).lower(): str(v) for k, v in headers.items() if isinstance(v, str)}


def user_from_request(data: Mapping[str, Any], user_header: str | None) -> str | None:
    """The usable user id of a request, or ``None`` (missing, empty or a placeholder)."""
    user = normalize_user_id(data.get("user"))
    if user is None and user_header:
        user = normalize_user_id(request_headers(data).get(user_header))
    return user


def conversation_from_request(
    data: Mapping[str, Any], conversation_header: str | None = None
) -> str | None:
    """The explicit conversation id of a request, or ``None``: ``metadata.conversation_id``,
    the ``x-litellm-session-id`` header, else the configured ``conversation_header``."""
    metadata = data.get("metadata")
    if isinstance(metadata, dict):
        for source in (metadata, metadata.get("requester_metadata")):
            if isinstance(source, dict):
                value = source.get("conversation_id")
                if isinstance(value, bool) or not isinstance(value, str | int):
                    continue
                if str(value).strip():
                    return str(value).strip()
    headers = request_headers(data)
    for name in (SESSION_HEADER, conversation_header):
        value = headers.get(name) if name else None
        if value and value.strip():
            return value.strip()
    return None


def identify(
    data: Mapping[str, Any],
    auth: object,
    *,
    prefix: str,
    namespace: str,
    user_header: str | None = None,
    memory_scope: str = "user",
    alias: str = "",
    conversation_header: str | None = None,
) -> Identity | None:
    """Identify a chat request; ``None`` when it has no usable user id or its authentication
    no tenant (:func:`tenant_from_auth`).

    Args:
        memory_scope: ``user`` (memories shared by the user's conversations in ``namespace``)
            or ``conversation`` (memories of this conversation only).
        alias: the model alias the request names (kept for the extraction job).

    Raises:
        InvalidIdError: never for a usable user; ids that cannot go into a key as they are
            are hashed by :func:`litellm_memory_hook.store.keys.key_id`.
    """
    user = user_from_request(data, user_header)
    tenant = tenant_from_auth(auth)
    if user is None or tenant is None:
        return None
    conversation = conversation_from_request(data, conversation_header) or namespace
    keys = ConversationKeys.for_ids(prefix, tenant, user, conversation)
    scope = (
        conversation_scope(keys.conversation)
        if memory_scope == "conversation"
        else user_scope(namespace)
    )
    memory = keys.user_keys.memory_set(scope)
    return Identity(tenant, user, conversation, namespace, keys, memory, alias)
