"""``bench extraction`` end to end on a tiny hand-made sample in the LoCoMo format.

The sample is written here (LoCoMo's layout: Maharana et al., ACL 2024, snap-research/locomo,
CC BY-NC 4.0; no LoCoMo text is used): two sessions of 15 lines, Bob (the assistant's speaker)
opening both, so the replay seeds an empty store with an assistant line and later sends an
assistant line with no user line before it. Lines are ~350 characters, so the recent window
(8,000 characters) holds only the last ~22 of the 30, and the oldest evidence can reach the model
only through a memory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import redis

from benchmarks.evidence import LAYERS, OracleIndex, parse_sections, question_cover
from benchmarks.extraction import run_sample
from benchmarks.extraction_report import BenchReport
from benchmarks.replay_plan import plan_steps
from litellm_memory_hook.tools.histories import HistoryLine
from tests.support.paths import REPO
from tests.support.redis_url import real_redis_url

FILLER = (
    "the weather stayed mild while we walked along the river path and talked about books, "
    "recipes, trains and old songs, then we stopped for tea near the bridge and watched the "
    "boats go by until the light faded; "
)
SPECIAL = {
    "D1:2": "Guess what, we brought home a greyhound named Pixel on Saturday, she sleeps all day "
    "long on the sofa.",
    "D1:6": "My aunt works at the lighthouse museum in Portsmouth, she gives the guided tours.",
    "D2:14": "The final concert of the choir was wonderful, we sang four songs and got a standing "
    "ovation.",
}
OBSERVATIONS = {
    "session_1_observation": {
        "Alice": [
            ["Alice took in a rescued greyhound called Pixel, who joined the family.", "D1:2"],
            ["Alice's aunt guides tours at a museum in Portsmouth.", "D1:6"],
        ],
        "Bob": [["Bob enjoys long walks by the river.", "D1:1"]],
    },
    "session_2_observation": {
        "Alice": [["Alice's choir got a standing ovation at its last concert.", "D2:14"]],
    },
}
QUESTIONS: list[dict[str, Any]] = [
    # only the (old) observation can answer: the line shares no word with the question
    {"question": "Which animal joined the family from the rescue centre?", "evidence": ["D1:2"]},
    {"question": "Where is the lighthouse museum?", "evidence": ["D1:6"]},
    {"question": "How did the choir do?", "evidence": ["D2:14"], "category": 4},
    {"question": "Which songs?", "evidence": ["D2:14; D7:1"], "category": 4},
]


def _session(number: int) -> list[dict[str, str]]:
    turns = []
    for i in range(1, 16):
        speaker = "Bob" if i % 2 else "Alice"
        dia_id = f"D{number}:{i}"
        text = SPECIAL.get(dia_id) or f"Session {number} note {i}: {FILLER * 2}".strip()
        turns.append({"speaker": speaker, "dia_id": dia_id, "text": text})
    return turns


def _write_sample(path: Path) -> Path:
    sample = {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Alice",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": _session(1),
            "session_2_date_time": "7:10 pm on 20 May, 2023",
            "session_2": _session(2),
        },
        "observation": OBSERVATIONS,
        "qa": [{"answer": "-", "category": 1, **q} for q in QUESTIONS],
    }
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return path


def _line(role: str, dia_id: str, text: str = "x") -> HistoryLine:
    return HistoryLine(role=role, text=text, ts_ms=0, speaker=role, line_id=dia_id)


def test_plan_steps_keeps_every_line_a_turn() -> None:
    lines = [
        _line("assistant", "b0"),
        _line("user", "a1"),
        _line("user", "a2"),
        _line("assistant", "b1"),
        _line("assistant", "b2"),
        _line("user", "a3"),
        _line("assistant", "b3"),
        _line("user", "a4"),
        _line("user", "blank", " "),
    ]
    steps, skipped = plan_steps(lines)
    assert [[x.line_id for x in s.lines] for s in steps] == [
        ["b0", "a1", "a2", "b1"],
        ["b2", "a3", "b3"],
        ["a4"],
    ]
    assert steps[-1].reply is None
    assert [x.line_id for x in skipped] == ["blank"]


def test_question_cover_reads_each_layer() -> None:
    system = "\n".join(
        [
            "You are Mira.",
            "",
            "<memory_context>",
            "preamble",
            "<memories>",
            "Facts saved from earlier chats; newer messages win if they disagree.",
            "- Alice has a dog ‹Pixel›.",
            "- Something nobody labelled.",
            "</memories>",
            "<summary>",
            "The story so far.",
            "They met at the old mill.",
            "</summary>",
            "<earlier_lines>",
            "note",
            "- [2023-05-08 13:56 UTC] Alice: the lighthouse is red",
            "</earlier_lines>",
            "</memory_context>",
        ]
    )
    assert parse_sections(system)["summary"] == ["They met at the old mill."]
    lines = {
        "D1": _line("user", "D1", "the lighthouse is red"),
        "D2": _line("user", "D2", "They met at the old mill."),
        "D3": _line("user", "D3", "I got a dog <Pixel>"),
        "D4": _line("assistant", "D4", "window line"),
    }
    oracle = OracleIndex({"Alice has a dog <Pixel>.": ["D3"]})
    body: dict[str, Any] = {
        "messages": [
            {"role": "system", "content": system},
            {"role": "assistant", "content": "a window line here"},
            {"role": "user", "content": "question"},
        ]
    }
    cover = question_cover(body, ["D1", "D2; D3", "D4", "D9"], lines, oracle)
    assert (cover.recall, cover.summary, cover.memories, cover.window) == (1, 1, 1, 1)
    assert (cover.window_recall, cover.all_layers, cover.memories_only) == (2, 4, 1)
    assert cover.unknown_evidence == 1 and cover.unmapped_items == 1


def test_bench_extraction_on_a_tiny_sample(tmp_path: Path) -> None:
    data = _write_sample(tmp_path / "tiny.json")
    phases: list[str] = []
    result = run_sample(
        data,
        "tiny-1",
        config=REPO / "config.yaml",
        redis_url=real_redis_url(),
        progress=lambda phase, done, total: phases.append(phase),
        extraction_timeout_s=30,
        log_dir=tmp_path / "logs",
    )
    # every line stored as its own turn, and every stored message extracted
    assert result.lines == result.stored_messages == 30
    assert result.skipped_lines == 0
    assert result.extraction_complete and result.cursor == result.stored_messages
    assert result.extraction_calls >= 2
    assert sum(result.call_lines) >= 30
    assert result.stats.get("jobs_committed", 0) >= 2 and not result.stats.get("jobs_failed")
    assert result.memories_stored == 4
    assert any(p.endswith("questions") for p in phases)

    by_question = {q.index: q for q in result.questions}
    old = by_question[0]  # evidence in an old line, answered by its observation only
    assert (old.window, old.recall, old.memories, old.memories_only) == (0, 0, 1, 1)
    assert old.unmapped_items == 0
    assert by_question[1].recall == 1  # rare shared words recall the old line
    assert by_question[2].window == 1  # a recent line is in the window
    assert by_question[3].unknown_evidence == 1 and len(by_question[3].evidence) == 1

    report = BenchReport(source=str(data), model="demo", redis_url="", samples=(result,), seconds=1)
    payload = json.loads(json.dumps(report.as_json()))
    sample = payload["samples"][0]
    for row in (sample, payload["pooled"]):
        assert set(row["cover"]) == set(LAYERS)
        assert {"calls_per_100_messages", "chars_per_call", "median_prompt_chars"} <= set(row)
        assert set(row["chars_per_call"]) == {"mean", "median", "max"}
    assert set(LAYERS) <= set(sample["items"][0])
    assert sample["cover"]["all_layers"] >= sample["cover"]["window_recall"]

    client = redis.Redis.from_url(real_redis_url())
    try:
        assert not list(client.scan_iter(match=f"{result.prefix}:*"))
    finally:
        client.close()
