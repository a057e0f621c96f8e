"""Which keys a memory API call works on: the tenant, user and model alias a caller names, resolved
to a conversation and a memory set as for a chat request."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from litellm_memory_hook.memory_api.errors import MemoryInputError
from litellm_memory_hook.settings import AliasMemoryConfig, MemorySettings
from litellm_memory_hook.store.keys import (
    TENANT_FORMS,
    ConversationKeys,
    MemoryKeys,
    conversation_scope,
    is_tenant,
    normalize_user_id,
    user_scope,
)


@dataclass(frozen=True)
class MemoryTarget:
    """The keys a memory API call works on, and the raw ids they came from."""

    tenant: str
    user: str
    alias: str
    namespace: str
    conversation: ConversationKeys
    memory: MemoryKeys


#: why a user id was refused (:func:`~litellm_memory_hook.store.keys.normalize_user_id`).
BAD_USER = (
    "'user' must be a user id that can get memory: not empty or invisible, not a placeholder "
    "such as 'null', 'default' or 'anonymous'"
)


def check_tenant(tenant: str) -> None:
    """Refuse a tenant id that is not one of ``TENANT_FORMS`` (master, team-<id> ...)."""
    if not is_tenant(tenant):
        raise MemoryInputError(f"tenant {tenant!r} is not a tenant id: use {TENANT_FORMS}")


def checked_user(user: object) -> str:
    """The user id a caller named, normalised as a chat request's.

    Raises:
        MemoryInputError: not a user id that can get memory.
    """
    user_id = normalize_user_id(user)
    if user_id is None:
        raise MemoryInputError(BAD_USER)
    return user_id


def no_conversation(target: MemoryTarget) -> str:
    """The message of a target whose conversation holds nothing."""
    return f"no conversation {target.conversation.conversation!r} for user {target.user!r}"


def resolve_target(
    settings: MemorySettings,
    alias_lookup: Callable[[str], AliasMemoryConfig | None],
    *,
    tenant: str,
    user: object,
    model: str,
    conversation: str | None = None,
) -> MemoryTarget:
    """The memory set and conversation named by a caller.

    Args:
        settings: the global settings (key prefix).
        alias_lookup: alias name -> its memory config (``None``: unknown or memory off).
        tenant: the caller's tenant (from auth, never from the body).
        user: the user id, as a chat request would send it.
        model: the model alias.
        conversation: a conversation id; default: the alias namespace's default conversation.

    Raises:
        MemoryInputError: the tenant is not one of
            :data:`~litellm_memory_hook.store.keys.TENANT_FORMS`, the user id is not
            usable, or the alias has no memory.
    """
    check_tenant(tenant)
    user_id = checked_user(user)
    if not isinstance(model, str) or not model.strip():
        raise MemoryInputError("'model' must name a memory-enabled model alias")
    alias = alias_lookup(model)
    if alias is None:
        raise MemoryInputError(f"model {model!r} is not a memory-enabled alias")
    namespace = alias.namespace or model
    raw_conversation = conversation.strip() if isinstance(conversation, str) else ""
    keys = ConversationKeys.for_ids(
        settings.storage.key_prefix, tenant, user_id, raw_conversation or namespace
    )
    scope = (
        conversation_scope(keys.conversation)
        if alias.memory_scope == "conversation"
        else user_scope(namespace)
    )
    return MemoryTarget(tenant, user_id, model, namespace, keys, keys.user_keys.memory_set(scope))


def resolve_user(settings: MemorySettings, *, tenant: str, user: object) -> MemoryTarget:
    """The target of a forget of a whole user named without a model alias: an alias removed
    from the config, or memory turned off, must not keep a user's data from being forgotten.
    Only its user's keys are used (its conversation and memory set are placeholders named
    ``-``, which a forget of the whole user does not use).

    Raises:
        MemoryInputError: the tenant or the user id is not usable.
    """
    check_tenant(tenant)
    user_id = checked_user(user)
    keys = ConversationKeys.for_ids(settings.storage.key_prefix, tenant, user_id, "-")
    return MemoryTarget(tenant, user_id, "", "", keys, keys.user_keys.memory_set("ns:-"))


__all__ = [
    "BAD_USER",
    "MemoryTarget",
    "check_tenant",
    "checked_user",
    "no_conversation",
    "resolve_target",
    "resolve_user",
]
