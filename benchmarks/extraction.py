"""Benchmark: what extraction costs, and how much labelled evidence each memory layer delivers.

Data: files in the LoCoMo format, read in place and never copied: LoCoMo (Maharana et al.,
"Evaluating Very Long-Term Conversational Memory of LLM Agents", ACL 2024; snap-research/locomo,
CC BY-NC 4.0). Only its lines, ``observation`` labels (through the stand-in's oracle) and
questions with evidence are used.

One run per sample, through real processes (``litellm-memory bench extraction``):

1. the package's stand-in model in oracle mode (``STANDIN_MODE=oracle``, ``STANDIN_ORACLE`` = the
   data file: an extraction call is answered with the current memories plus LoCoMo's own
   observations of the lines in the job's prompt; the summary stays as it was) and a LiteLLM
   proxy with the memory hook (the given ``config.yaml`` with the stand-in's port, a fresh key
   prefix ``membench-ext-<hex>``, ``extraction.quiet_s: 3600`` so that only the 12-message trigger
   and the final flush start jobs, ``extraction.poll_s: 0.2``) on free ports, against the given
   Redis, with one user id per sample (``bench-<sample_id>``, default conversation);
2. the conversation is replayed message by message with the ``openai`` client as a client that
   sends only the new message: each ``speaker_a`` line is the user message (with the speaker in
   ``name``, which the hook stores and shows in recalled lines and extraction prompts), and the
   next ``speaker_b`` line is the model's reply, queued in the stand-in first
   (``POST /_standin/replies``), so the stored reply is the dataset line. LoCoMo alternates
   speakers inside a session; at session boundaries a speaker can say two lines in a row. Such
   lines are sent as separate turns, never joined (the oracle recognises lines by their exact
   text): consecutive user lines go in one request as several user messages (all stored, then the
   reply); an assistant line with no user line before it is sent in the next request as client
   history (the last stored exchange exactly as stored, then that line, then the new user
   message), which the hook's whole-history rule stores as an assistant turn (on an empty store,
   by seeding). Trailing user lines get an empty reply, which is not stored;
3. after the last line: ``POST /memory/v1/flush`` (the master key), then wait until the
   conversation's cursor equals its last seq, it has no entry in the due set and no lease (or a
   timeout, reported as ``extraction_complete: false``);
4. benchmark 1, the cost of extraction: extraction calls (every call the stand-in received, a
   retry included) per 100 stored messages; characters sent per call (all message text of the
   call; mean, median, max); tokens per call (``tokens_prompt`` / ``tokens_completion`` of
   ``HGETALL <prefix>:stats``, as LiteLLM reported the stand-in's usage, which is characters / 4);
   messages per call (the call's ``<new_lines>``; 12 or 13 when only the 12-message trigger
   fired); jobs committed and failed (same hash, which also holds ``jobs_conflict``). These
   figures depend on timing: the replay sends the next message at once, while a job runs;
5. every QA question with evidence is sent read-only (``metadata.memory_mode: read_only``) and
   the body the stand-in received is read back. An evidence line (a ``dia_id``; ids joined with
   ";" count separately; ids that name no line are left out and counted as
   ``unknown_evidence``) is covered by a layer when:

   * ``window``: its text (after :func:`~litellm_memory_hook.core.escape.escape_data` on both
     sides) is in one of the window messages (every message after the system message but the
     question);
   * ``recall``: its text is in the ``<earlier_lines>`` section;
   * ``memories``: an item of ``<memories>`` or ``<fixed_memories>`` is an observation whose
     evidence ``dia_ids`` include it (items mapped to observations with
     ``GET /_standin/oracle?sample_id=...``, compared by
     :func:`~litellm_memory_hook.extraction.parse.fact_key` after ``escape_data``; an item cut
     with "…" maps by its start);
   * ``summary``: its text is in ``<summary>`` (about 0 in oracle mode, which keeps the summary);
   * ``window_recall`` and ``all_layers``: the unions; ``memories_only``: memories but neither
     window nor recall.

   Cover = evidence lines covered / evidence lines, per sample and pooled over samples (total
   covered / total evidence). ``median_prompt_chars``: the median over questions of all message
   text (characters) the model received;
6. every key under the run's prefix is deleted (SCAN) and both processes are stopped, also on an
   error or Ctrl-C.

The processes get the caller's environment without its ``LITELLM_MEMORY_*`` variables (the run's
config file alone sets the memory settings, so budgets are the config's and the key prefix is
the run's own). Runtime: about 20-60 s per LoCoMo sample (two process starts, 180-330 requests,
150-260 questions) on an idle machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, cast

import httpx
import openai
import redis
import yaml

from benchmarks.evidence import OracleIndex, QuestionCover, question_cover
from benchmarks.extraction_report import BenchReport, SampleResult
from benchmarks.keys import run_prefix
from benchmarks.replay_plan import Step, message, plan_steps, replayed_part, step_messages
from litellm_memory_hook.core.messages import content_text
from litellm_memory_hook.errors import ConfigError
from litellm_memory_hook.store.keys import ConversationKeys, due_key, stats_key
from litellm_memory_hook.tools.files import read_utf8
from litellm_memory_hook.tools.histories import History, HistoryLine, load_locomo
from litellm_memory_hook.tools.stack import Stack, stack, stack_config
from litellm_memory_hook.tools.standin import parse_extraction_prompt

__all__ = [
    "run_config",
    "run_extraction_bench",
    "run_sample",
    "source_config",
]

PREFIX_STEM: Final = "membench-ext"
"""Key prefixes of a run are ``membench-ext-<8 hex>``; every key under one is deleted after."""
MASTER_TENANT: Final = "master"
EXTRACTION_QUIET_S: Final = 3600.0
"""Quiet time in the run's config (seconds): long, so only the 12-message trigger and flushes."""
EXTRACTION_POLL_S: Final = 0.2
"""How often the in-proxy worker looks at the due set in the run's config (seconds)."""

#: (phase description, done, total): called as a run advances.
Progress = Callable[[str, int, int], None]

# --- processes -------------------------------------------------------------------------------


def source_config(source: Path, model: str) -> dict[str, Any]:
    """The proxy config the run derives its own from (:func:`run_config`): ``source``, which
    must have ``model`` as an alias with memory enabled.

    Raises:
        ValueError: ``model`` is not an alias of ``source`` with memory enabled.
        ConfigError: ``source`` cannot be read or is not UTF-8.
    """
    config = cast(dict[str, Any], yaml.safe_load(read_utf8(source, ConfigError)))
    for entry in config.get("model_list") or ():
        memory = (entry.get("model_info") or {}).get("memory")
        if entry.get("model_name") == model and memory:
            return config
    raise ValueError(f"{source}: no alias {model!r} with memory enabled")


def run_config(
    source: Mapping[str, Any], *, standin_port: int, prefix: str, redis_url: str
) -> dict[str, Any]:
    """The run's proxy config: ``source`` with every alias on the stand-in, the key prefix,
    the Redis URL and the quiet / poll times of the module docstring."""
    memory = {
        "storage": {"key_prefix": prefix},
        "redis": {"url": redis_url},
        "extraction": {"quiet_s": EXTRACTION_QUIET_S, "poll_s": EXTRACTION_POLL_S},
    }
    return stack_config(source, standin_port=standin_port, memory=memory)


def _namespace(config: Mapping[str, Any], model: str) -> str:
    """The alias's memory namespace (its default conversation id): ``namespace`` or its name."""
    for entry in config.get("model_list") or ():
        memory = (entry.get("model_info") or {}).get("memory")
        if entry.get("model_name") == model and isinstance(memory, dict):
            return str(memory.get("namespace") or model)
    return model


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


@contextlib.contextmanager
def _stack(
    *,
    data: Path,
    config: Path,
    redis_url: str,
    model: str,
    folder: Path,
) -> Iterator[Stack]:
    """Start the oracle stand-in and the proxy (:func:`litellm_memory_hook.tools.stack.stack`);
    stop them and delete the prefix's keys after."""
    prefix = run_prefix(PREFIX_STEM)
    source = source_config(config, model)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_MEMORY_")}
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        client.ping()
    except redis.RedisError:
        client.close()
        raise
    with stack(
        folder,
        lambda port: run_config(source, standin_port=port, prefix=prefix, redis_url=redis_url),
        prefix=prefix,
        redis_env={"REDIS_URL": redis_url, "LITELLM_MEMORY_REDIS__URL": redis_url},
        keys=client,
        env=base_env,
        standin_env={"STANDIN_MODE": "oracle", "STANDIN_ORACLE": str(data.resolve())},
        kind=Stack,
        control_timeout_s=60,
    ) as running:
        yield running


# --- one sample --------------------------------------------------------------------------------


def _reply_text(response: Any) -> str:
    choices = getattr(response, "choices", None) or []
    message = getattr(choices[0], "message", None) if choices else None
    return str(getattr(message, "content", None) or "")


def _replay(
    stack: Stack,
    client: openai.OpenAI,
    steps: Sequence[Step],
    *,
    model: str,
    user: str,
    sample_id: str,
    progress: Progress | None,
    whole_history: bool = False,
) -> None:
    previous: Step | None = None
    sent: list[dict[str, Any]] = []  # a whole-history client's history so far
    for done, step in enumerate(steps, start=1):
        expected = step.reply.text if step.reply else ""
        stack.standin.post("/_standin/replies", json=[expected]).raise_for_status()
        if whole_history:
            messages = [*sent, *(message(line) for line in (*step.before, *step.users))]
        else:
            messages = step_messages(step, previous)
        response = client.chat.completions.create(
            model=model,
            user=user,
            messages=cast(Any, messages),
        )
        if whole_history:
            sent = [*sent, *(message(line) for line in step.lines)]
        got = _reply_text(response)
        if got != expected:
            raise RuntimeError(
                f"{sample_id} request {done}: the proxy answered {got[:80]!r}, not the queued "
                f"line {expected[:80]!r} (replies out of step)"
            )
        previous = step
        if progress and (done % 5 == 0 or done == len(steps)):
            progress(f"{sample_id} replay", done, len(steps))


def _state(stack: Stack, model: str, user: str) -> dict[str, Any]:
    response = stack.http.get(
        f"{stack.proxy}/memory/v1/summary",
        params={"user": user, "model": model},
        headers={"Authorization": f"Bearer {stack.master_key}"},
    )
    response.raise_for_status()
    return cast(dict[str, Any], response.json())


def _memories_stored(stack: Stack, model: str, user: str) -> int:
    response = stack.http.get(
        f"{stack.proxy}/memory/v1/memories",
        params={"user": user, "model": model},
        headers={"Authorization": f"Bearer {stack.master_key}"},
    )
    response.raise_for_status()
    return len(response.json().get("memories") or ())


def _wait_extracted(
    stack: Stack, keys: ConversationKeys, *, model: str, user: str, timeout_s: float
) -> tuple[bool, dict[str, Any]]:
    """Flush, then wait until the cursor reached the last seq with nothing due and no lease."""
    response = stack.http.post(
        f"{stack.proxy}/memory/v1/flush",
        json={"user": user, "model": model},
        headers={"Authorization": f"Bearer {stack.master_key}"},
    )
    response.raise_for_status()
    deadline = time.monotonic() + timeout_s
    while True:
        state = _state(stack, model, user)
        leased = bool(stack.redis.exists(keys.lease))
        due = stack.redis.zscore(due_key(stack.prefix), keys.ref)
        if (
            state["cursor"] >= state["seq"]
            and state["due_ms"] is None
            and due is None
            and not leased
        ):
            return True, state
        if time.monotonic() >= deadline:
            return False, state
        time.sleep(0.2)


def _questions(
    stack: Stack,
    client: openai.OpenAI,
    history: History,
    oracle: OracleIndex,
    *,
    model: str,
    user: str,
    limit: int | None,
    progress: Progress | None,
) -> list[QuestionCover]:
    by_id = {line.line_id: line for line in history.lines}
    asked = [q for q in history.qa if q.evidence][: limit if limit else None]
    results: list[QuestionCover] = []
    for index, item in enumerate(asked):
        stack.standin.delete("/_standin/requests").raise_for_status()
        client.chat.completions.create(
            model=model,
            user=user,
            messages=[{"role": "user", "content": item.question}],
            extra_body={"metadata": {"memory_mode": "read_only"}},
        )
        records = stack.standin.get("/_standin/requests").json()
        extraction = stack.standin.get("/_standin/extraction_requests").json()
        chats = [r for r in records if r not in extraction]
        if not chats:
            raise RuntimeError(f"{history.sample_id}: the stand-in recorded no chat request")
        results.append(
            question_cover(
                chats[-1],
                item.evidence,
                by_id,
                oracle,
                index=index,
                category=item.category,
            )
        )
        if progress and ((index + 1) % 5 == 0 or index + 1 == len(asked)):
            progress(f"{history.sample_id} questions", index + 1, len(asked))
    return results


def run_sample(
    data: Path,
    sample_id: str,
    *,
    config: Path,
    redis_url: str,
    model: str = "demo",
    limit_questions: int | None = None,
    extraction_timeout_s: float = 180.0,
    progress: Progress | None = None,
    log_dir: Path | None = None,
    max_steps: int | None = None,
    whole_history: bool = False,
    after_replay: Callable[[Any], None] | None = None,
) -> SampleResult:
    """Run one sample end to end (steps 1-6 of the module docstring).

    Args:
        data: the LoCoMo-format file (also the stand-in's oracle).
        sample_id: the sample, e.g. ``conv-26``.
        config: the proxy config to derive the run's config from (the package's config.yaml).
        redis_url: a real Redis; keys under ``membench-ext-<hex>:`` are written and deleted.
        model: the memory-enabled alias served by the stand-in.
        limit_questions: ask at most this many questions (``None``: all with evidence).
        extraction_timeout_s: longest wait for extraction after the flush (seconds).
        progress: called with (phase, done, total) as the run advances.
        log_dir: keep the processes' logs and the config here (default: a temporary folder,
            deleted after a successful or interrupted run and kept, with its path in the error,
            after a failed one).
        max_steps: replay only the first requests (``None``: all); the questions are then those
            whose evidence lies in the replayed lines.
        whole_history: replay as a client that sends its whole history with every request
            (the lines of every earlier request, then the new ones), not only the new lines.
        after_replay: called with the run's stack once extraction has finished, before the
            questions (``bench cost`` reads what the model received then).

    Raises:
        DatasetError: the file or the sample cannot be read.
        RuntimeError: a process did not start, or the replay went out of step.
        openai.APIError, httpx.HTTPError, redis.RedisError: a request failed.
    """
    started = time.monotonic()
    history = load_locomo(data, sample_id)
    steps, skipped = plan_steps(history.lines)
    if max_steps is not None:
        steps = steps[:max_steps]
        history = replayed_part(history, steps)
    user = f"bench-{sample_id}"
    folder = log_dir or Path(tempfile.mkdtemp(prefix=f"bench-extraction-{sample_id}-"))
    folder.mkdir(parents=True, exist_ok=True)
    ok = False
    try:
        if progress:
            progress(f"{sample_id} starting", 0, len(steps))
        with _stack(
            data=data, config=config, redis_url=redis_url, model=model, folder=folder
        ) as stack:
            try:
                result = _run_stack(
                    stack,
                    history,
                    steps,
                    skipped,
                    model=model,
                    user=user,
                    limit_questions=limit_questions,
                    extraction_timeout_s=extraction_timeout_s,
                    progress=progress,
                    started=started,
                    whole_history=whole_history,
                    after_replay=after_replay,
                )
            except (RuntimeError, openai.APIError, httpx.HTTPError) as exc:
                raise RuntimeError(
                    f"{sample_id} failed: {exc}\nlogs in {folder}; proxy log tail:\n"
                    f"{_tail(stack.log)}"
                ) from exc
        ok = True
        return result
    except KeyboardInterrupt:
        ok = True  # stopped on purpose: nothing to look at in the logs
        raise
    finally:
        if ok and log_dir is None:
            shutil.rmtree(folder, ignore_errors=True)


def _run_stack(
    stack: Stack,
    history: History,
    steps: Sequence[Step],
    skipped: Sequence[HistoryLine],
    *,
    model: str,
    user: str,
    limit_questions: int | None,
    extraction_timeout_s: float,
    progress: Progress | None,
    started: float,
    whole_history: bool = False,
    after_replay: Callable[[Any], None] | None = None,
) -> SampleResult:
    sample_id = history.sample_id
    namespace = _namespace(stack.config, model)
    keys = ConversationKeys.for_ids(stack.prefix, MASTER_TENANT, user, namespace)
    client = openai.OpenAI(
        base_url=f"{stack.proxy}/v1", api_key=stack.master_key, max_retries=0, timeout=120
    )
    t0 = time.monotonic()
    _replay(
        stack,
        client,
        steps,
        model=model,
        user=user,
        sample_id=sample_id,
        progress=progress,
        whole_history=whole_history,
    )
    replay_s = time.monotonic() - t0
    if progress:
        progress(f"{sample_id} extracting", 0, 1)
    t0 = time.monotonic()
    complete, state = _wait_extracted(
        stack, keys, model=model, user=user, timeout_s=extraction_timeout_s
    )
    wait_s = time.monotonic() - t0
    if after_replay is not None:
        after_replay(stack)
    calls = stack.standin.get("/_standin/extraction_requests").json()
    call_chars = tuple(
        sum(len(content_text(m.get("content"))) for m in body.get("messages") or ())
        for body in calls
    )
    call_lines = tuple(
        len(parse_extraction_prompt(body.get("messages") or ()).lines) for body in calls
    )
    raw_stats = cast(dict[str, str], stack.redis.hgetall(stats_key(stack.prefix)))
    stats = {k: int(v) for k, v in sorted(raw_stats.items())}
    memories_stored = _memories_stored(stack, model, user)
    oracle = OracleIndex(
        stack.standin.get("/_standin/oracle", params={"sample_id": sample_id}).json()
    )
    t0 = time.monotonic()
    questions = _questions(
        stack,
        client,
        history,
        oracle,
        model=model,
        user=user,
        limit=limit_questions,
        progress=progress,
    )
    questions_s = time.monotonic() - t0
    return SampleResult(
        sample_id=sample_id,
        prefix=stack.prefix,
        lines=len(history.lines),
        skipped_lines=len(skipped),
        requests=len(steps),
        stored_messages=int(state["seq"]),
        cursor=int(state["cursor"]),
        extraction_complete=complete,
        extraction_calls=len(calls),
        call_chars=call_chars,
        call_lines=call_lines,
        stats=stats,
        memories_stored=memories_stored,
        questions=tuple(questions),
        replay_s=round(replay_s, 2),
        extraction_wait_s=round(wait_s, 2),
        questions_s=round(questions_s, 2),
        seconds=round(time.monotonic() - started, 2),
    )


def run_extraction_bench(
    data: Path,
    sample_ids: Sequence[str],
    *,
    config: Path,
    redis_url: str,
    model: str = "demo",
    limit_questions: int | None = None,
    extraction_timeout_s: float = 180.0,
    progress: Progress | None = None,
) -> BenchReport:
    """Run :func:`run_sample` for each sample, one after another (arguments as there)."""
    started = time.monotonic()
    results = [
        run_sample(
            data,
            sample_id,
            config=config,
            redis_url=redis_url,
            model=model,
            limit_questions=limit_questions,
            extraction_timeout_s=extraction_timeout_s,
            progress=progress,
        )
        for sample_id in sample_ids
    ]
    return BenchReport(
        source=str(data),
        model=model,
        redis_url=redis_url,
        samples=tuple(results),
        seconds=round(time.monotonic() - started, 2),
        limit_questions=limit_questions,
        settings={
            "extraction_quiet_s": EXTRACTION_QUIET_S,
            "extraction_poll_s": EXTRACTION_POLL_S,
            "config": str(config),
        },
    )
