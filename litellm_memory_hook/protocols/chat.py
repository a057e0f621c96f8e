"""Chat completions (``/v1/chat/completions``, call types ``acompletion`` and ``completion``): the
engine's own protocol. The view is the request itself; the reply is LiteLLM's ``ModelResponse``
(whole) or its chunks (streamed).
"""

from __future__ import annotations

from typing import Any

from litellm_memory_hook.protocols.base import HistoryMode

#: fields of a model's reply message that are not replayed: LiteLLM's own bookkeeping and
#: response-only annotations (a provider would reject them in a request).
_REPLY_DROPPED = frozenset({"provider_specific_fields", "annotations", "function_call"})


def _plain(value: Any) -> Any:
    """A pydantic object (LiteLLM's types) as plain JSON data."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def reply_message(response: Any) -> dict[str, Any] | None:
    """The assistant message of a non-streaming ModelResponse as a plain dict, every field the
    model sent kept (``reasoning_content``, ``thinking_blocks``, ``refusal``, ``audio`` id ...:
    providers reject a replayed tool-call turn without its reasoning), ``None`` values dropped
    except ``content``."""
    choices = getattr(response, "choices", None)
    if not choices:
        return None
    message = getattr(choices[0], "message", None)
    if message is None:
        return None
    raw = _plain(message)
    if not isinstance(raw, dict):
        return None
    out: dict[str, Any] = {"role": "assistant", "content": raw.get("content")}
    for key, value in raw.items():
        if key in ("role", "content") or key in _REPLY_DROPPED or value is None or value == []:
            continue
        if key == "tool_calls":
            value = [
                {
                    "id": c.get("id"),
                    "type": "function",
                    "function": {
                        "name": (c.get("function") or {}).get("name"),
                        "arguments": (c.get("function") or {}).get("arguments") or "",
                    },
                }
                for c in value
                if isinstance(c, dict)
            ]
        elif key == "audio" and isinstance(value, dict):
            # the id a later request sends back, and the words (the stored turn's text)
            value = {"id": value.get("id"), "transcript": value.get("transcript") or ""}
        out[key] = value
    return out


class StreamAccumulator:
    """Assembles the reply text and tool calls of a stream from its chunks.

    Tool-call deltas are merged by their ``index``; a delta without one starts a new call when
    it carries an ``id`` not seen yet, else continues the newest call (some providers send whole
    parallel calls with ``index`` None). Choices without an ``index`` count as choice 0.
    """

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.thinking: list[Any] = []
        self.calls: list[dict[str, Any]] = []
        self.audio_id = ""
        self.refusal: list[str] = []
        self.transcript: list[str] = []
        self._by_index: dict[int, dict[str, Any]] = {}
        self._by_id: dict[str, dict[str, Any]] = {}

    def _slot(self, call: Any) -> dict[str, Any]:
        index = getattr(call, "index", None)
        ident = getattr(call, "id", None)
        if isinstance(index, int) and index in self._by_index:
            return self._by_index[index]
        if ident and ident in self._by_id:
            return self._by_id[ident]
        if not isinstance(index, int) and not ident and self.calls:
            return self.calls[-1]
        slot: dict[str, Any] = {
            "id": None,
            "type": "function",
            "function": {"name": "", "arguments": ""},
        }
        self.calls.append(slot)
        if isinstance(index, int):
            self._by_index[index] = slot
        return slot

    def add(self, chunk: Any) -> None:
        for choice in getattr(chunk, "choices", None) or ():
            if (getattr(choice, "index", 0) or 0) != 0:
                continue
            delta = getattr(choice, "delta", None)
            if delta is None:
                continue
            content = getattr(delta, "content", None)
            if isinstance(content, str):
                self.text.append(content)
            reasoning = getattr(delta, "reasoning_content", None)
            if isinstance(reasoning, str):
                self.reasoning.append(reasoning)
            refusal = getattr(delta, "refusal", None)
            if isinstance(refusal, str):
                self.refusal.append(refusal)
            audio = getattr(delta, "audio", None)
            if audio is not None:  # an audio-output model streams its transcript
                self._add_audio(_plain(audio))
            thinking = getattr(delta, "thinking_blocks", None)
            if isinstance(thinking, list):
                self.thinking.extend(_plain(thinking))
            for call in getattr(delta, "tool_calls", None) or ():
                slot = self._slot(call)
                ident = getattr(call, "id", None)
                if ident:
                    slot["id"] = ident
                    self._by_id[ident] = slot
                function = getattr(call, "function", None)
                if function is not None:
                    if getattr(function, "name", None):
                        slot["function"]["name"] += function.name
                    if getattr(function, "arguments", None):
                        slot["function"]["arguments"] += function.arguments

    def _add_audio(self, audio: Any) -> None:
        if not isinstance(audio, dict):
            return
        if audio.get("id"):
            self.audio_id = str(audio["id"])
        transcript = audio.get("transcript")
        if isinstance(transcript, str):
            self.transcript.append(transcript)

    def message(self) -> dict[str, Any]:
        """The streamed reply as one message; a tool-call reply with no text has ``content:
        None``, as the same reply not streamed has (an empty string is replayed to Anthropic
        as a placeholder text block)."""
        text = "".join(self.text)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if self.calls:
            message["content"] = text or None
            message["tool_calls"] = self.calls
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.thinking:
            message["thinking_blocks"] = self.thinking
        if self.refusal:
            message["content"] = text or None
            message["refusal"] = "".join(self.refusal)
        if self.audio_id or self.transcript:
            message["content"] = text or None
            message["audio"] = {"id": self.audio_id, "transcript": "".join(self.transcript)}
        return message


def _has_tools(view: dict[str, Any]) -> bool:
    """True when the request declares tools or its messages carry tool calls or results."""
    if view.get("tools") or view.get("functions"):
        return True
    messages = view.get("messages")
    if not isinstance(messages, list):
        return False
    return any(
        isinstance(m, dict) and (m.get("role") in ("tool", "function") or m.get("tool_calls"))
        for m in messages
    )


class ChatCompletions:
    """The chat-completions adapter: the view is the request, nothing to write back."""

    name = "chat"
    metadata_field = "metadata"

    def view(self, data: dict[str, Any]) -> dict[str, Any] | None:
        return data

    def apply(self, data: dict[str, Any], view: dict[str, Any]) -> None:
        return None  # the view is the request

    def history_mode(self, view: dict[str, Any]) -> HistoryMode:
        """``keep`` for an agent (tools declared or used), ``window`` for a chat app."""
        return "keep" if _has_tools(view) else "window"

    def reply_message(self, response: Any) -> dict[str, Any] | None:
        return reply_message(response)

    def accumulator(self) -> StreamAccumulator:
        return StreamAccumulator()


#: the adapter (stateless: one for every request).
CHAT = ChatCompletions()
