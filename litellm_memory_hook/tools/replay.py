"""Replaying a labelled conversation's questions through a running proxy.

For each QA item of a LoCoMo-format sample, the question is sent through the proxy as the new user
message, read-only (``metadata.memory_mode = "read_only"``: nothing is stored), and what actually
reached the model is read back from the stand-in model's record. Measured per question:

* evidence cover: the share of the item's evidence lines whose text reached the model (in the
  system message or the window), compared after :func:`escape.escape_data` on both sides;
* prompt characters: all message text that reached the model;
* hook time: the ``x-memory-hook-ms`` response header (the pre-call hook's own time, ms).

Data: LoCoMo (Maharana et al., ACL 2024; snap-research/locomo, CC BY-NC 4.0).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import httpx
import openai

from litellm_memory_hook.core.escape import escape_data
from litellm_memory_hook.core.messages import content_text
from litellm_memory_hook.extraction.prompt import is_extraction_call
from litellm_memory_hook.tools.histories import History


@dataclass(frozen=True)
class QuestionResult:
    """One replayed question."""

    question: str
    category: int
    evidence: int
    evidence_reached: int
    prompt_chars: int
    hook_ms: float | None


@dataclass(frozen=True)
class ReplayReport:
    """The replay's figures (the JSON report has these fields plus ``items``)."""

    sample_id: str
    questions: int
    evidence_cover: float
    median_prompt_chars: float
    median_full_history_chars: float
    hook_ms_p50: float | None
    hook_ms_p95: float | None
    items: tuple[QuestionResult, ...]

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        data = asdict(self)
        data["items"] = [asdict(i) for i in self.items]
        return data


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation (numpy's default method).

    Raises:
        ValueError: no values.
    """
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def received_text(body: dict[str, Any]) -> str:
    """All message text of a request body that reached the model, escaped as data."""
    return escape_data(
        " ".join(
            content_text(m.get("content"))
            for m in body.get("messages") or ()
            if isinstance(m, dict)
        )
    )


def replay(
    history: History,
    *,
    base_url: str,
    api_key: str,
    model: str,
    user: str,
    standin_url: str,
    conversation: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayReport:
    """Send every question of ``history.qa`` through the proxy and measure what reached the model.

    Args:
        history: the labelled conversation (already imported into the proxy's memory).
        base_url: the proxy's OpenAI base URL, e.g. ``http://127.0.0.1:4000/v1``.
        api_key: a proxy key (the master key for the demo).
        model: the memory-enabled alias.
        user: the ``user`` field (the imported user).
        standin_url: the stand-in model's base URL (its records are read from there).
        conversation: ``metadata.conversation_id`` when the import used one.
        progress: called with (done, total) after each question.

    Raises:
        openai.APIError, httpx.HTTPError: the proxy or the stand-in failed.
    """
    by_id = {line.line_id: line for line in history.lines}
    full_chars = sum(len(line.text) for line in history.lines)
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=60)
    items: list[QuestionResult] = []
    metadata: dict[str, Any] = {"memory_mode": "read_only"}
    if conversation:
        metadata["conversation_id"] = conversation
    questions = [q for q in history.qa if q.evidence]
    with httpx.Client(base_url=standin_url, timeout=30) as standin:
        for done, item in enumerate(questions, start=1):
            standin.delete("/_standin/requests").raise_for_status()
            raw = client.chat.completions.with_raw_response.create(
                model=model,
                user=user,
                messages=[{"role": "user", "content": item.question}],
                extra_body={"metadata": metadata},
                extra_headers={"x-memory-debug": "1"},
            )
            raw.parse()
            records = [
                r
                for r in standin.get("/_standin/requests").json()
                if not is_extraction_call(r.get("messages"))  # background jobs run meanwhile
            ]
            body = records[-1] if records else {}
            seen = received_text(body)
            lines = [by_id[e] for e in item.evidence if e in by_id]
            reached = sum(1 for line in lines if escape_data(line.text) in seen)
            hook_header = raw.headers.get("x-memory-hook-ms")
            items.append(
                QuestionResult(
                    question=item.question,
                    category=item.category,
                    evidence=len(lines),
                    evidence_reached=reached,
                    prompt_chars=sum(
                        len(content_text(m.get("content"))) for m in body.get("messages") or ()
                    ),
                    hook_ms=float(hook_header) if hook_header else None,
                )
            )
            if progress:
                progress(done, len(questions))
    evidence = sum(i.evidence for i in items)
    hook_times = [i.hook_ms for i in items if i.hook_ms is not None]
    return ReplayReport(
        sample_id=history.sample_id,
        questions=len(items),
        evidence_cover=round(sum(i.evidence_reached for i in items) / evidence, 4)
        if evidence
        else 0.0,
        median_prompt_chars=statistics.median(i.prompt_chars for i in items) if items else 0.0,
        median_full_history_chars=float(full_chars),
        hook_ms_p50=round(percentile(hook_times, 50), 3) if hook_times else None,
        hook_ms_p95=round(percentile(hook_times, 95), 3) if hook_times else None,
        items=tuple(items),
    )
