"""The filter as engines apply it (``core.where``): the tree an engine translates passes exactly
what the reference passes when it says it is exact, and never less when it is not; reading
deeper finds the k that pass however far down they rank."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longterm.core.filters import matches
from longterm.core.where import deeper, holds, record_tokens, where_of
from longterm.records import MemoryRecord
from longterm.testing import make_record
from longterm.testing.filter_strategies import filters, metadata


def _record(meta: dict[str, Any], ts: float, session: str, role: str) -> MemoryRecord:
    return make_record("x", metadata=meta, session=session, role=role, timestamp=ts)


records = st.builds(
    _record,
    metadata(),
    st.sampled_from([100.0, 101.0, 102.0]),
    st.sampled_from(["s1", "s2"]),
    st.sampled_from(["user", "model"]),
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(filters(), records)
def test_the_tree_is_the_filter_when_exact_and_never_narrower(spec: dict[str, Any], record: MemoryRecord) -> None:
    where = where_of(spec)
    assert where is not None
    want = matches(where.filter, record)
    got = holds(where.native, set(record_tokens(record)), record.timestamp)
    if where.exact:
        assert got == want, (spec, record.metadata)
    else:
        assert got or not want, (spec, record.metadata)


def test_one_and_one_point_oh_are_one_token_and_true_is_not_one() -> None:
    ones = [record_tokens(make_record("x", metadata={"n": v})) for v in (1, 1.0)]
    assert ones[0] == ones[1]
    assert record_tokens(make_record("x", metadata={"n": True})) != ones[0]


def test_reading_deeper_finds_the_k_that_pass_below_the_others() -> None:
    rows = [make_record(f"r{i}", metadata={"n": 5 if i >= 900 else 0}) for i in range(1000)]
    where = where_of({"n": {"$gt": 3}})
    assert where is not None and not where.exact
    asked: list[int] = []

    def fetch(n: int) -> list[MemoryRecord]:
        asked.append(n)
        return rows[:n]

    got = deeper(fetch, 5, where, lambda r: r, exact=False)
    assert [r.metadata["n"] for r in got] == [5] * 5
    assert asked == [20, 80, 320, 1280]
