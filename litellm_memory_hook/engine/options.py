"""The knobs of one request's rebuild (:class:`ContextOptions`), and their budgets sized to the
model's declared window.

Budgets are characters (``_chars``) and messages; a model's window is estimated tokens
(:mod:`litellm_memory_hook.core.model_window`: one token per :data:`~litellm_memory_hook.core.
model_window.BYTES_PER_TOKEN` bytes). What the hook adds shrinks recalled lines first, then
memories, the summary, the window, and pinned memories last (docs/prompt.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from litellm_memory_hook.core.budgets import Budget
from litellm_memory_hook.core.model_window import (
    BYTES_PER_TOKEN,
    ModelLimit,
    estimate_tokens,
    shrink,
)
from litellm_memory_hook.core.prompt import PromptWording
from litellm_memory_hook.engine.recall_step import RecallOptions
from litellm_memory_hook.protocols.base import HistoryMode
from litellm_memory_hook.settings import AliasMemoryConfig, MemorySettings

#: estimated tokens of what frames the added layers (tags, notes, the reminder) besides their
#: budgets: kept free when sizing them to a model's window.
FRAMING_TOKENS = 200


@dataclass(frozen=True)
class ContextOptions:
    """Per-request knobs of :func:`prepare`."""

    budget: Budget = Budget()  # noqa: RUF009 (frozen, so one shared default is safe)
    operator_rules: str = ""
    recall: RecallOptions = RecallOptions()  # noqa: RUF009 (frozen, so one shared default is safe)
    regenerate_window_s: float = 300.0
    max_stored_chars: int = 32_000
    timezone: str | None = None
    wording: PromptWording | None = None
    persona: str = ""
    custom_instructions: str = ""
    regenerate: bool = False
    layout: Literal["cache", "seed"] = "seed"
    low_water: float = 0.6
    tail_in_user: bool = False
    tail_after_tools: bool = False
    cache_marks: bool = False
    history: HistoryMode = "window"

    @classmethod
    def for_alias(
        cls,
        settings: MemorySettings,
        alias: AliasMemoryConfig,
        *,
        timezone: str | None = None,
        persona: str = "",
        custom_instructions: str = "",
        regenerate: bool = False,
        tail_in_user: bool = False,
        tail_after_tools: bool = False,
        cache_marks: bool = False,
        history: HistoryMode = "window",
    ) -> ContextOptions:
        """The options of a request to ``alias``: its own values, else the global settings.
        ``tail_in_user``: the alias's provider moves system messages to the top (the cache
        layout's tail then goes in the user's last message; ``tail_after_tools``: after the
        tool results that end a request, too: :func:`~litellm_memory_hook.core.assemble.
        assemble`); ``cache_marks``: it caches only
        where ``cache_control`` marks say; ``history``: the request's history mode
        (:attr:`~litellm_memory_hook.settings.AliasMemoryConfig.history`)."""
        return cls(
            budget=Budget(
                chars=alias.window.max_chars or settings.window.max_chars,
                messages=alias.window.max_messages or settings.window.max_messages,
                pinned_chars=settings.memories.max_pinned_chars,
                memory_chars=settings.memories.max_chars,
                summary_chars=settings.summary.max_chars,
            ),
            operator_rules=alias.system_prompt,
            recall=RecallOptions.for_alias(settings, alias),
            regenerate_window_s=settings.requests.regenerate_window_s,
            max_stored_chars=settings.storage.max_message_chars,
            timezone=timezone or settings.timezone,
            wording=alias.wording,
            persona=persona,
            custom_instructions=custom_instructions,
            regenerate=regenerate,
            layout=alias.layout,
            low_water=alias.window_low_water,
            tail_in_user=tail_in_user,
            tail_after_tools=tail_after_tools,
            cache_marks=cache_marks,
            history=history,
        )


def fitted_to(options: ContextOptions, room_chars: int) -> ContextOptions:
    """``options`` with the layers' budgets cut so that what the hook adds takes at most
    ``room_chars`` characters (:func:`~litellm_memory_hook.core.model_window.shrink`'s order:
    recall, memories, summary, window, pinned); ``options`` itself when it fits already."""
    budget, recall = options.budget, options.recall
    recall_chars = recall.chars if recall.mode == "budget" else recall.k * RECALL_LINE_CHARS
    memory_factor = HEAD_MEMORY_FACTOR + TAIL_MEMORY_SHARE if options.layout == "cache" else 1
    costs = {
        "recall": recall_chars,
        "memories": int(budget.memory_chars * memory_factor),
        "summary": budget.summary_chars,
        "window": budget.chars,
        "pinned": budget.pinned_chars,
    }
    cut = shrink(costs, room_chars)
    if cut == costs:
        return options
    if cut["recall"] != recall_chars:
        recall = replace(recall, mode="budget", chars=cut["recall"], k=recall.k or 1)
    return replace(
        options,
        recall=recall,
        budget=replace(
            budget,
            memory_chars=int(cut["memories"] / memory_factor),
            summary_chars=cut["summary"],
            chars=max(cut["window"], 0),
            pinned_chars=cut["pinned"],
        ),
    )


#: characters a recalled line is counted at when recall takes a fixed number of lines.
RECALL_LINE_CHARS = 300


#: the cache layout's head shows up to this many times the memory budget: the head is billed at
#: the provider's cached rate (0.1x), and every memory it shows is one the volatile tail need not
#: repeat (the tail adds the memories the seed layout would choose for the message that the head
#: lacks)
HEAD_MEMORY_FACTOR = 2

#: share of the memory budget the tail gives to memories that share rare words with the user's
#: last message and are not in the head (highest score first). On LoCoMo dev (bench cost, 150
#: requests): without them the memories' cover fell from 0.631 to 0.131; with 0.2 the cover of
#: all layers is 0.812 (seed 0.795) at 0.50 of the seed layout's billed input (docs/cost.md)
TAIL_MEMORY_SHARE = 0.2


def must_send(messages: object, history: str) -> list[Any]:
    """The client's messages that go to the model whatever the budgets: its system messages
    and its new turn (from its last user message on), or all of them with ``history: keep``."""
    if not isinstance(messages, list):
        return []
    if history == "keep":
        return messages
    last_user = max((i for i, m in enumerate(messages) if _role(m) == "user"), default=0)
    return [
        m for i, m in enumerate(messages) if i >= last_user or _role(m) in ("system", "developer")
    ]


def _role(message: object) -> object:
    return message.get("role") if isinstance(message, dict) else None


def sized(
    options: ContextOptions, messages: object, limit: ModelLimit | None
) -> ContextOptions | None:
    """``options`` with the layers' budgets sized to the model's declared window (``None``:
    none declared, as they are); ``None`` when the client's own messages and the reply fill it
    (nothing is added: outcome ``too_large``)."""
    if limit is None:
        return options
    must = [{"content": options.operator_rules.strip()}, *must_send(messages, options.history)]
    room = limit.prompt_tokens - estimate_tokens(must) - FRAMING_TOKENS
    return fitted_to(options, room * BYTES_PER_TOKEN) if room > 0 else None


def refitted(
    options: ContextOptions, built: Sequence[Any], messages: object, limit: ModelLimit | None
) -> ContextOptions | None:
    """For a prompt ``built`` still over the model's window (text of more tokens a character
    than the estimate's budgets assumed: CJK, Devanagari), ``options`` with the budgets cut in
    the same proportion; ``None`` when it fits (or no window is declared)."""
    if limit is None:
        return None
    used = estimate_tokens(built)
    if used <= limit.prompt_tokens:
        return None
    added = max(used - estimate_tokens(must_send(messages, options.history)), 1)
    room = added - (used - limit.prompt_tokens) - FRAMING_TOKENS
    return fitted_to(options, max(room, 0) * BYTES_PER_TOKEN * room // added)
