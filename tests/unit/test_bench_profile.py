"""``bench proxy --profile`` (issue 30): py-spy's raw stacks sorted into categories
(:mod:`benchmarks.proxy_profile`, tested on hand-written stacks), the breakdown per request and
the one-line refusal when py-spy cannot run. With real processes:
tests/e2e/test_bench_profile.py."""

from __future__ import annotations

from collections import Counter

import pytest
from typer.testing import CliRunner

from benchmarks import proxy_profile as pp
from benchmarks import py_spy
from litellm_memory_hook.tools import cli

SITE = "/venv/lib/python3.11/site-packages"
STDLIB = "/usr/lib/python3.11"
HOOK = "/src/checkout/litellm_memory_hook"

#: the root of every stack of the proxy's main thread: LiteLLM's command line, uvicorn, the loop
MAIN = (
    f"<module> (<string>:1);run_server ({SITE}/litellm/proxy/proxy_cli.py:1642);"
    f"run ({SITE}/uvicorn/main.py:643);Runner.run ({STDLIB}/asyncio/runners.py:118)"
)
REQUEST = (
    f"{MAIN};RequestResponseCycle.run_asgi ({SITE}/uvicorn/protocols/http/h11_impl.py:407);"
    f"FastAPI.__call__ ({SITE}/fastapi/applications.py:1224);"
    f"chat_completion ({SITE}/litellm/proxy/proxy_server.py:12326)"
)
PRE_CALL = (
    f"{REQUEST};ProxyLogging.pre_call_hook ({SITE}/litellm/proxy/utils.py:3087);"
    f"MemoryHook.async_pre_call_hook ({HOOK}/proxy/hook.py:453)"
)
WORKER = (
    f"Thread._bootstrap ({STDLIB}/threading.py:1002);Thread.run ({STDLIB}/threading.py:982);"
    f"_worker ({STDLIB}/concurrent/futures/thread.py:83);"
    f"_WorkItem.run ({STDLIB}/concurrent/futures/thread.py:58)"
)


def _stack(text: str) -> pp.Stack:
    [(stack, _)] = pp.parse_raw(f"{text} 1").items()
    return stack


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the hook, by its outermost frame, with what runs under it (Redis I/O included)
        (
            f"{PRE_CALL};prepare ({HOOK}/proxy/context.py:251);"
            f"Redis.execute_command ({SITE}/redis/asyncio/client.py:998)",
            pp.HOOK_PRE,
        ),
        (
            f"{REQUEST};ProxyLogging.post_call_success_hook ({SITE}/litellm/proxy/utils.py:1);"
            f"MemoryHook.async_post_call_success_hook ({HOOK}/proxy/hook.py:925);"
            f"MemoryHook._commit ({HOOK}/proxy/hook.py:1060)",
            pp.HOOK_POST,
        ),
        (
            f"{REQUEST};ProxyLogging.post_call_response_headers_hook ({SITE}/litellm/proxy/"
            f"utils.py:9);MemoryHook.async_post_call_response_headers_hook ({HOOK}/proxy/"
            "hook.py:1510)",
            pp.HOOK_HEADERS,
        ),
        (
            f"{MAIN};MemoryHook._spawn.<locals>.guarded ({HOOK}/proxy/hook.py:1476);"
            f"MemoryHook._write ({HOOK}/proxy/hook.py:1220)",
            pp.HOOK_WRITE,
        ),
        (
            f"{MAIN};Periodic._run ({HOOK}/periodic.py:70);"
            f"MetricsPublisher._publish ({HOOK}/proxy/metrics.py:600)",
            pp.HOOK_PERIODIC,
        ),
        (
            f"{MAIN};ExtractionWorker.run_forever ({HOOK}/extraction/worker.py:260)",
            pp.HOOK_PERIODIC,
        ),
        # cut short by py-spy: its outer frames are missing
        (
            f"prepare ({HOOK}/proxy/context.py:251);clean_lead ({HOOK}/core/assemble.py:9)",
            pp.HOOK_OTHER,
        ),
        # redis-py's own task (a send under wait_for): no hook frame, no LiteLLM frame under the
        # loop, although LiteLLM's command line is at the root
        (
            f"{MAIN};AbstractConnection._send_packed_command ({SITE}/redis/asyncio/"
            f"connection.py:1503);StreamWriter.writelines ({STDLIB}/asyncio/streams.py:330)",
            pp.REDIS,
        ),
        # LiteLLM's own Redis client is LiteLLM's
        (
            f"{MAIN};RedisBatch.flush ({SITE}/litellm/caching/redis_batch.py:363);"
            f"Pipeline.execute ({SITE}/redis/asyncio/client.py:2486)",
            pp.LITELLM,
        ),
        (
            f"{MAIN};Logging.async_success_handler ({SITE}/litellm/litellm_core_utils/"
            f"litellm_logging.py:2000);BaseModel.__init__ ({SITE}/pydantic/main.py:250)",
            pp.LOGGING,
        ),
        (
            f"{REQUEST};ProxyLogging.pre_call_hook ({SITE}/litellm/proxy/utils.py:3087);"
            f"_PROXY_MaxParallelRequestsHandler.async_pre_call_hook ({SITE}/litellm/proxy/"
            "hooks/parallel_request_limiter_v3.py:900)",
            pp.LOGGING,
        ),
        (
            f"{MAIN};completion_cost ({SITE}/litellm/cost_calculator.py:700)",
            pp.LOGGING,
        ),
        # a timing decorator of that module around the upstream call is not logging's work
        (
            f"{REQUEST};track_llm_api_timing.<locals>.decorator.<locals>.async_wrapper ("
            f"{SITE}/litellm/litellm_core_utils/logging_utils.py:150);"
            f"OpenAIChatCompletion.acompletion ({SITE}/litellm/llms/openai/openai.py:800)",
            pp.LITELLM,
        ),
        (
            f"{WORKER};completion ({SITE}/litellm/main.py:1200)",
            pp.THREADS,
        ),
        (f"{WORKER[: WORKER.rindex(';')]}", pp.THREADS),  # a worker woken, not yet running
        # the thread pool's submit runs in the loop's thread: LiteLLM's
        (
            f"{REQUEST};acompletion ({SITE}/litellm/main.py:600);ThreadPoolExecutor.submit ("
            f"{STDLIB}/concurrent/futures/thread.py:167)",
            pp.LITELLM,
        ),
        (
            f"{REQUEST};TypeAdapter.validate_python ({SITE}/pydantic/type_adapter.py:400)",
            pp.PYDANTIC,
        ),
        (f"{REQUEST};Router.acompletion ({SITE}/litellm/router.py:1000)", pp.LITELLM),
        (
            f"{MAIN};RequestResponseCycle.send ({SITE}/uvicorn/protocols/http/h11_impl.py:500);"
            f"Connection.send ({SITE}/h11/_connection.py:500)",
            pp.HTTP_SERVER,
        ),
        (
            f"{MAIN};ResponseHandler.data_received ({SITE}/aiohttp/client_proto.py:300)",
            pp.HTTP_CLIENT,
        ),
        (MAIN, pp.EVENT_LOOP),  # the loop's own C code (uvloop): the stack ends at the loop
        (
            f"<module> (x.py:1);BaseEventLoop.run_forever ({STDLIB}/asyncio/base_events.py:607);"
            f"BaseEventLoop._run_once ({STDLIB}/asyncio/base_events.py:1884);"
            f"EpollSelector.select ({STDLIB}/selectors.py:468)",
            pp.EVENT_LOOP,
        ),
        (f"{MAIN};deepcopy ({STDLIB}/copy.py:128)", pp.OTHER),
    ],
)
def test_each_stack_goes_to_its_category(text: str, expected: str) -> None:
    assert pp.category(_stack(text)) == expected


def test_short_file_names_and_packages() -> None:
    """py-spy's short names (without ``--full-filenames``) are read too; a path from this
    checkout or a site-packages is shown from its package on."""
    assert pp.package_of("litellm/router.py") == "litellm"
    assert pp.package_of(f"{STDLIB}/asyncio/events.py") == "asyncio"
    assert pp.package_of(f"{STDLIB}/copy.py") == "copy"
    assert pp.package_of("<frozen abc>") == "<frozen abc>"
    assert pp.package_of(f"{HOOK}/proxy/hook.py") == pp.HOOK_PACKAGE
    assert pp.short_path(f"{HOOK}/proxy/hook.py") == "litellm_memory_hook/proxy/hook.py"
    assert pp.short_path(f"{SITE}/litellm/router.py") == "litellm/router.py"
    assert pp.category(_stack("x (litellm_memory_hook/proxy/hook.py:1)")) == pp.HOOK_OTHER


def test_parse_raw_sums_stacks_and_keeps_an_empty_one() -> None:
    text = (
        f"{MAIN};f ({SITE}/litellm/router.py:10) 3\n"
        f"{MAIN};f ({SITE}/litellm/router.py:12) 2\n"  # another line: the same frame
        " 4\n"  # no frame at all
        "garbage without a count\n"
    )
    stacks = pp.parse_raw(text)
    assert sorted(stacks.values()) == [4, 5]
    assert stacks[()] == 4
    [full] = [s for s in stacks if s]
    assert full[-1] == pp.Frame("f", f"{SITE}/litellm/router.py")
    assert str(full[-1]) == "f (litellm/router.py)"
    assert pp.category(()) == pp.OTHER


def test_the_breakdown_per_request_scaled_to_the_proxys_cpu() -> None:
    """Samples / rate / requests, then scaled to the CPU ``/proc`` read per request: with 40
    samples at 100 Hz over 10 requests (40 ms sampled a request) and 20 ms of CPU a request,
    each sampled millisecond is half a millisecond of CPU."""
    pre = _stack(f"{PRE_CALL};recall ({HOOK}/core/recall/rank.py:5)")
    other_pre = _stack(f"{PRE_CALL};plan ({HOOK}/core/plan.py:5)")
    logging = _stack(
        f"{MAIN};Logging.async_success_handler ({SITE}/litellm/x/litellm_logging.py:1)"
    )
    router = _stack(f"{REQUEST};Router.acompletion ({SITE}/litellm/router.py:1000)")
    memory = pp.SideProfile(Counter({pre: 8, other_pre: 4, logging: 8, router: 20}), 10, 0.2)
    context = pp.SideProfile(Counter({logging: 6, router: 24}), 10, 0.15)
    report = pp.ProfileBreakdown(memory, context, rate=100).as_json()
    rows = {r["category"]: r for r in report["categories"]}
    assert [r["category"] for r in report["categories"]] == list(pp.CATEGORIES)
    assert rows[pp.HOOK_PRE] == {
        "category": pp.HOOK_PRE,
        "memory_ms": 6.0,  # 12 samples = 120 ms / 10 requests = 12 ms sampled, x 0.5
        "context_ms": 0.0,
        "difference_ms": 6.0,
        "memory_sampled_ms": 12.0,
        "context_sampled_ms": 0.0,
    }
    # context: 30 samples = 30 ms sampled a request for 15 ms of CPU: x 0.5 too
    assert rows[pp.LOGGING]["memory_ms"] == 4.0 and rows[pp.LOGGING]["context_ms"] == 3.0
    assert rows[pp.LITELLM]["difference_ms"] == pytest.approx(10.0 - 12.0)
    assert report["total"]["memory_ms"] == pytest.approx(20.0)
    assert report["total"]["context_ms"] == pytest.approx(15.0)
    assert report["hook_total"]["memory_ms"] == 6.0
    assert report["cpu_per_sampled_ms"] == {"memory": 0.5, "context": 0.5}
    assert report["samples"] == {"memory": 40, "context": 30}
    leaves = report["top_leaves"]
    assert leaves[0]["leaf"] == "recall (litellm_memory_hook/core/recall/rank.py)"
    assert leaves[0]["category"] == pp.HOOK_PRE and leaves[0]["difference_ms"] == 4.0
    assert leaves[-1]["leaf"] == "Router.acompletion (litellm/router.py)"  # less than context
    differences = [row["difference_ms"] for row in leaves]
    assert differences == sorted(differences, reverse=True)
    # without a CPU reading the sampled figures stand
    unread = pp.ProfileBreakdown(
        pp.SideProfile(memory.stacks, 10), pp.SideProfile(context.stacks, 10), rate=100
    ).as_json()
    assert unread["total"]["memory_ms"] == pytest.approx(40.0)
    tables = pp.profile_tables(report, "t")
    assert len(tables) == 2 and tables[0].row_count == len(pp.CATEGORIES) + 2


def test_profile_refused_in_one_line_without_py_spy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(py_spy, "py_spy_path", lambda: None)
    assert "py-spy is not installed" in (py_spy.profiler_problem() or "")
    result = CliRunner().invoke(cli.app, ["bench", "proxy", "--profile"], env={"COLUMNS": "80"})
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "py-spy is not installed" in lines[0], result.output
    assert "Traceback" not in result.output


def test_profile_needs_the_context_side() -> None:
    result = CliRunner().invoke(
        cli.app, ["bench", "proxy", "--profile", "--no-context-side"], env={"COLUMNS": "80"}
    )
    assert result.exit_code != 0 and "context side" in result.output
