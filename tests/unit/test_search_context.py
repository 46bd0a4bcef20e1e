"""A hit's neighbours lend it score, time named in a question favours its memories, near-identical
hits fold (retrieval/context.py), and the facade's arguments for them."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from longterm import LongTermMemory
from longterm.errors import InvalidInputError
from longterm.records import Hit, MemoryRecord, record_id
from longterm.retrieval.context import LEND_NEXT, LEND_PREVIOUS, fold, rerank
from longterm.retrieval.when import TimeWindow


def rec(event: str, text: str = "", at: float = 1_700_000_000.0) -> MemoryRecord:
    return MemoryRecord(
        id=record_id("app", "u", "s", event),
        app_name="app",
        user_id="u",
        session_id="s",
        event_id=event,
        text=text or event,
        timestamp=at,
    )


def hit(event: str, score: float, **kw: object) -> Hit:
    return Hit(record=rec(event, **kw), score=score)  # type: ignore[arg-type]


def test_the_turn_after_a_hit_gains_and_one_that_matched_nothing_becomes_a_hit() -> None:
    question, answer, other = hit("q", 0.8), rec("a"), hit("x", 0.1)
    out = rerank([question, other], [question], [([], [answer])])
    assert [h.record.event_id for h in out] == ["q", "a", "x"]
    assert out[1].score == pytest.approx(LEND_NEXT * 0.8) and out[1].extra == {"lent": pytest.approx(0.16)}
    assert out[1].arms == {}  # no arm found it: its neighbour lent it


def test_the_turn_before_gains_less_and_scores_add_up_to_at_most_one() -> None:
    before, h, after = hit("b", 0.2), hit("h", 0.9), hit("n", 0.95)
    out = {x.record.event_id: x for x in rerank([after, h, before], [h], [([before.record], [after.record])])}
    assert out["b"].score == pytest.approx(0.2 + LEND_PREVIOUS * 0.9)
    assert out["n"].score == 1.0  # 0.95 + 0.18, capped


def test_hits_inside_the_window_come_first_and_outside_keep_their_score() -> None:
    old, new = hit("old", 0.5, at=1_000.0), hit("new", 0.4, at=5_000.0)
    out = rerank([old, new], window=TimeWindow(4_000.0, 6_000.0, "last week"))
    assert [h.record.event_id for h in out] == ["new", "old"]
    assert out[0].score == pytest.approx(0.6) and out[0].extra["when"] == "last week" and out[1].score == 0.5
    assert rerank([old, new]) == [old, new]


def test_ties_at_the_top_are_broken_by_the_uncapped_sum() -> None:
    a, b = hit("a", 1.0, at=1_000.0), hit("b", 1.0, at=5_000.0)
    out = rerank([a, b], window=TimeWindow(4_000.0, 6_000.0, "in May"))
    assert [h.record.event_id for h in out] == ["b", "a"] and out[0].score == 1.0


def test_near_identical_hits_fold_into_the_best() -> None:
    out = fold([hit("1", 0.9, text="I live in Lisbon."), hit("2", 0.8, text="i live in  lisbon"), hit("3", 0.5)])
    assert [h.record.event_id for h in out] == ["1", "3"] and out[0].extra["folded"] == 1


async def test_a_time_in_the_question_favours_the_memories_of_that_time(tmp_path: Path) -> None:
    m = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")})
    may, june = datetime(2023, 5, 10, tzinfo=timezone.utc), datetime(2023, 6, 20, tzinfo=timezone.utc)
    for sid, when, text in [
        ("s1", june, "hiking with Ana"),
        ("s2", may, "I went hiking with Ana and her dog, and it rained all day"),
    ]:
        await m.add_events_to_memory(
            app_name="app",
            user_id="u",
            session_id=sid,
            events=[
                {
                    "id": sid,
                    "author": "user",
                    "timestamp": when.timestamp(),
                    "content": {"role": "user", "parts": [{"text": text}]},
                }
            ],
        )
    now = datetime(2023, 7, 1, tzinfo=timezone.utc)
    plain = await m.search_memory(app_name="app", user_id="u", query="hiking with Ana", now=now)
    assert plain.memories[0].custom_metadata["session_id"] == "s1"  # the shorter memory
    in_may = await m.search_memory(app_name="app", user_id="u", query="hiking with Ana in May", now=now)
    assert in_may.memories[0].custom_metadata["session_id"] == "s2"
    assert in_may.memories[0].custom_metadata["when"] == "in May"
    typed = await m.search("hiking with Ana in May", user_id="u", now=now.isoformat())
    await m.close()
    assert typed == [] or typed[0].session_id in {"s1", "s2"}  # the simple API takes the same argument


@pytest.mark.parametrize(("name", "value"), [("context", -1), ("context", 21), ("context", True), ("now", "soon")])
async def test_bad_context_or_now_is_refused_naming_it(tmp_path: Path, name: str, value: object) -> None:
    m = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")})
    with pytest.raises(InvalidInputError, match=name):
        await m.search_memory(app_name="app", user_id="u", query="x", **{name: value})  # type: ignore[arg-type]
    await m.close()
