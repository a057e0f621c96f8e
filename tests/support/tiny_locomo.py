"""A LoCoMo file of two sessions and two questions, for the CLI's import and replay."""

from __future__ import annotations

import json
from pathlib import Path


def tiny_locomo(path: Path) -> None:
    sessions = {
        "speaker_a": "Ana",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "My grandmother taught me origami."},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "What a lovely skill to learn."},
        ],
        "session_2_date_time": "9:00 am on 9 June, 2023",
        "session_2": [
            {"speaker": "Ana" if i % 2 == 0 else "Bo", "dia_id": f"D2:{i + 1}", "text": f"Chat {i}"}
            for i in range(60)
        ],
    }
    qa = [
        {
            "question": "Who taught Ana origami?",
            "answer": "grandmother",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {
            "question": "What was the last chat?",
            "answer": "Chat 59",
            "evidence": ["D2:60"],
            "category": 4,
        },
    ]
    path.write_text(json.dumps([{"sample_id": "tiny", "conversation": sessions, "qa": qa}]))
