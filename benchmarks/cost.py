"""Benchmark: what memory costs in input once the provider's prompt cache is counted.

Providers bill the longest prefix a prompt shares with a recent one at a fraction (OpenAI's GPT-5
family and Anthropic's cache reads at 0.1x, older OpenAI models 0.25-0.5x; Anthropic writes
at 1.25x). A client that sends its whole history gets almost all of it from the cache; the hook
rebuilds the prompt for every request, so what it costs depends on how much of each prompt is a
prefix of the previous one.

One LoCoMo conversation (Maharana et al., ACL 2024; snap-research/locomo, CC BY-NC 4.0) is
replayed through a real proxy with the hook and the stand-in model in oracle mode (the machinery
of :mod:`benchmarks.extraction`: the first ``max_steps`` requests, the
extraction jobs answered with LoCoMo's observations), four times: the ``cache`` layout and the
``seed`` layout, each as a client that sends only the new message (``new``) and as one that
sends its whole history (``whole``). For every chat request the model received:

* ``prompt_chars``: the characters of its messages' text;
* ``cached``: the characters it shares as a prefix with the previous request's (the messages'
  roles and texts in order: what a provider's prefix cache reuses, counted in characters; a
  provider caches only from about 1,024 tokens on, which these figures leave out);
* billed-equivalent characters at each cached rate ``r``: ``(prompt - cached) + r * cached``;
  for Anthropic, ``1.25 * (prompt - cached) + 0.1 * cached`` (its cache writes cost more);
* extraction characters per request: every extraction call's characters over the requests.

Beside them, the baseline: the same conversation sent as its whole history to an alias without
memory (LiteLLM forwards a plain alias's messages as sent, so these prompts are computed from
the replayed lines, not sent). And the evidence cover of each run (``bench extraction``'s
measure: labelled evidence lines that reach the model in the window, the recalled lines, the
memories or the summary, over the questions whose evidence lies in the replayed lines).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmarks.extraction import Progress, run_sample
from benchmarks.replay_plan import message, plan_steps
from litellm_memory_hook.core.messages import content_text
from litellm_memory_hook.errors import ConfigError
from litellm_memory_hook.extraction.prompt import is_extraction_call
from litellm_memory_hook.tools.files import read_utf8
from litellm_memory_hook.tools.histories import load_locomo

RATES: tuple[float, ...] = (0.1, 0.25, 0.5)
"""Cached-input rates reported (fraction of the uncached price)."""

ANTHROPIC_WRITE, ANTHROPIC_READ = 1.25, 0.1
"""Anthropic's cache write and read prices (fractions of its input price)."""


def prompt_text(messages: Iterable[Mapping[str, Any]]) -> str:
    """What a prefix cache sees of a request: each message's role and text, in order."""
    return "".join(
        f"\x1e{m.get('role')}\x1f{content_text(m.get('content'))}"
        for m in messages
        if isinstance(m, Mapping)
    )


def shared_prefix(a: str, b: str) -> int:
    """Characters at the start of ``a`` and ``b`` that are the same."""
    limit = min(len(a), len(b))
    low, high = 0, limit
    while low < high:  # binary search on slices: C-speed comparisons, O(n log n) at worst
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


@dataclass(frozen=True)
class RequestCost:
    """One request: its prompt and the part of it a prefix cache would hold (characters)."""

    prompt: int
    cached: int

    def billed(self, rate: float) -> float:
        """Billed-equivalent characters at cached rate ``rate``."""
        return (self.prompt - self.cached) + rate * self.cached

    def billed_anthropic(self) -> float:
        """Billed-equivalent characters at Anthropic's write and read prices."""
        return ANTHROPIC_WRITE * (self.prompt - self.cached) + ANTHROPIC_READ * self.cached


def request_costs(prompts: Sequence[str]) -> list[RequestCost]:
    """Each prompt's size and the prefix it shares with the one before (none for the first)."""
    costs: list[RequestCost] = []
    previous = ""
    for text in prompts:
        costs.append(RequestCost(len(text), shared_prefix(text, previous)))
        previous = text
    return costs


@dataclass
class CostSeries:
    """One side of the benchmark: a layout and a client, or the baseline."""

    name: str
    client: str
    costs: list[RequestCost]
    extraction_chars: int = 0
    cover: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The figures of the series (means per request, characters)."""
        n = max(len(self.costs), 1)
        prompt = sum(c.prompt for c in self.costs)
        cached = sum(c.cached for c in self.costs)
        out: dict[str, Any] = {
            "name": self.name,
            "client": self.client,
            "requests": len(self.costs),
            "prompt_chars_mean": round(prompt / n, 1),
            "prompt_chars_median": statistics.median([c.prompt for c in self.costs] or [0]),
            "cached_share": round(cached / prompt, 4) if prompt else 0.0,
            "cached_share_median": statistics.median(
                [c.cached / c.prompt for c in self.costs if c.prompt] or [0.0]
            ),
            "extraction_chars_per_request": round(self.extraction_chars / n, 1),
            "billed_anthropic": round(sum(c.billed_anthropic() for c in self.costs) / n, 1),
            "cover": self.cover,
        }
        for rate in RATES:
            out[f"billed_{rate}"] = round(sum(c.billed(rate) for c in self.costs) / n, 1)
        return out


def baseline_prompts(data: Path, sample_id: str, max_steps: int | None) -> list[str]:
    """The prompts of the conversation sent as its whole history to an alias without memory:
    for each request, the lines of every earlier request, then its own new lines."""
    history = load_locomo(data, sample_id)
    steps, _ = plan_steps(history.lines)
    if max_steps is not None:
        steps = steps[:max_steps]
    prompts: list[str] = []
    sent: list[dict[str, Any]] = []
    for step in steps:
        prompts.append(prompt_text([*sent, *(message(x) for x in (*step.before, *step.users))]))
        sent.extend(message(line) for line in step.lines)
    return prompts


def layout_config(source: Path, dest: Path, layout: str, model: str) -> Path:
    """``source`` with ``layout`` set on the memory of ``model``, written to ``dest``.

    Raises:
        ConfigError: ``source`` cannot be read, or has no such alias with memory.
    """
    config = yaml.safe_load(read_utf8(source, ConfigError))
    for entry in config.get("model_list") or ():
        info = entry.get("model_info") or {}
        if entry.get("model_name") == model and info.get("memory"):
            memory = info["memory"] if isinstance(info["memory"], dict) else {}
            info["memory"] = {**memory, "layout": layout}
            entry["model_info"] = info
            break
    else:
        raise ConfigError(f"{source}: no alias {model!r} with memory enabled")
    dest.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    return dest


def _layout_run(
    data: Path,
    sample_id: str,
    *,
    config: Path,
    redis_url: str,
    model: str,
    layout: str,
    client: str,
    max_steps: int | None,
    limit_questions: int | None,
    progress: Progress | None,
) -> CostSeries:
    captured: dict[str, list[Any]] = {}

    def grab(stack: Any) -> None:
        records = stack.standin.get("/_standin/requests").json()
        captured["chats"] = [r for r in records if not is_extraction_call(r.get("messages"))]
        captured["extraction"] = stack.standin.get("/_standin/extraction_requests").json()

    with tempfile.TemporaryDirectory(prefix="bench-cost-") as folder:
        source = layout_config(config, Path(folder) / "config.yaml", layout, model)
        result = run_sample(
            data,
            sample_id,
            config=source,
            redis_url=redis_url,
            model=model,
            limit_questions=limit_questions,
            progress=progress,
            max_steps=max_steps,
            whole_history=client == "whole",
            after_replay=grab,
        )
    prompts = [prompt_text(body.get("messages") or ()) for body in captured.get("chats", [])]
    extraction = sum(
        len(prompt_text(body.get("messages") or ())) for body in captured.get("extraction", [])
    )
    return CostSeries(layout, client, request_costs(prompts), extraction, result.cover)


def run_cost_bench(
    data: Path,
    sample_id: str,
    *,
    config: Path,
    redis_url: str,
    model: str = "demo",
    max_steps: int | None = 150,
    limit_questions: int | None = None,
    clients: Sequence[str] = ("new", "whole"),
    layouts: Sequence[str] = ("cache", "seed"),
    progress: Callable[[str, int, int], None] | None = None,
) -> list[CostSeries]:
    """Run the benchmark (module docstring): each layout for each client, then the baseline."""
    series = [
        _layout_run(
            data,
            sample_id,
            config=config,
            redis_url=redis_url,
            model=model,
            layout=layout,
            client=client,
            max_steps=max_steps,
            limit_questions=limit_questions,
            progress=progress,
        )
        for client in clients
        for layout in layouts
    ]
    baseline = request_costs(baseline_prompts(data, sample_id, max_steps))
    series.append(CostSeries("whole history, no memory", "whole", baseline))
    return series


def cost_json(series: Sequence[CostSeries]) -> dict[str, Any]:
    """The report as JSON: each series' summary and its per-request prompt and cached chars."""
    return {
        "rates": list(RATES),
        "anthropic": {"write": ANTHROPIC_WRITE, "read": ANTHROPIC_READ},
        "series": [
            {
                **s.summary(),
                "per_request": [[c.prompt, c.cached] for c in s.costs],
            }
            for s in series
        ],
    }
