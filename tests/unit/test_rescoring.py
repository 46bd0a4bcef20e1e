"""Recency and importance re-scoring: off by default, every component exposed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from longterm import ConfigurationError, LongTermMemory

DAY = 86_400


def _text(text: str) -> dict:
    return {"role": "user", "parts": [{"text": text}]}


def session(now: float) -> dict:
    return {
        "id": "s",
        "app_name": "a",
        "user_id": "u",
        "events": [
            {
                "id": "old",
                "author": "user",
                "timestamp": now - 300 * DAY,
                "content": _text("my favourite band is Toto"),
            },
            {
                "id": "new",
                "author": "user",
                "timestamp": now - 1 * DAY,
                "content": _text("my favourite band is now Daft Punk, band band"),
            },
        ],
    }


async def test_off_by_default_and_recency_reorders(tmp_path: Path):
    now = time.time()
    plain = LongTermMemory(backend_config={"path": str(tmp_path / "a.db")})
    await plain.add_session_to_memory(session(now))
    res = await plain.search_memory(app_name="a", user_id="u", query="favourite Toto band")
    assert res.memories[0].custom_metadata["event_id"] == "old"
    assert "recency" not in res.memories[0].custom_metadata
    fresh = LongTermMemory(
        backend_config={"path": str(tmp_path / "a.db")}, rescoring={"recency_weight": 0.6, "half_life_days": 30}
    )
    res = await fresh.search_memory(app_name="a", user_id="u", query="favourite Toto band")
    top = res.memories[0].custom_metadata
    assert top["event_id"] == "new"
    assert set(top) >= {"relevance", "recency", "importance", "backend_score", "score"}
    assert top["score"] == pytest.approx(0.4 * top["relevance"] + 0.6 * top["recency"])


async def test_importance_from_metadata(tmp_path: Path):
    m = LongTermMemory(backend_config={"path": str(tmp_path / "b.db")}, rescoring={"importance_weight": 0.5})
    await m.add_events_to_memory(
        app_name="a",
        user_id="u",
        session_id="x",
        custom_metadata={"importance": 1.0},
        events=[{"id": "1", "author": "user", "content": {"role": "user", "parts": [{"text": "allergy: penicillin"}]}}],
    )
    await m.add_events_to_memory(
        app_name="a",
        user_id="u",
        session_id="y",
        events=[
            {
                "id": "2",
                "author": "user",
                "content": {"role": "user", "parts": [{"text": "allergy allergy season is annoying allergy"}]},
            }
        ],
    )
    res = await m.search_memory(app_name="a", user_id="u", query="allergy")
    assert res.memories[0].content.parts[0].text == "allergy: penicillin"
    assert res.memories[0].custom_metadata["importance"] == 1.0


def test_bad_weights_are_clear_errors():
    with pytest.raises(ConfigurationError, match="rescoring"):
        LongTermMemory(rescoring={"recency_weight": 0.8, "importance_weight": 0.5})
