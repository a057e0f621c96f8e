"""Who a turn belongs to: a request's raw ids (tenant, user, conversation, alias namespace),
its conversation's keys and its memory set's keys (:mod:`litellm_memory_hook.store.keys`).

The proxy reads them from LiteLLM's request (:func:`litellm_memory_hook.proxy.identity.
identify`); the CLI and the importer make them from ids given. The rules (one hash tag per user,
hashed ids): docs/design.md#identity-and-isolation.
"""

from __future__ import annotations

from dataclasses import dataclass

from litellm_memory_hook.store.keys import ConversationKeys, MemoryKeys


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
