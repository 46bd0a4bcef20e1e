"""Hypothesis strategies for filters and the metadata they read: one generator for the unit tests
of the filter tree and the contract's comparison of every engine with the reference.

The seam: ``metadata()`` draws metadata as users write it (flat and nested keys, lists, numbers
that are ints or floats, booleans, None), ``filters()`` draws ``filters=`` specs over the same keys
(every operator, ``$and``/``$or``/``$not``, dotted paths, the record fields). Small alphabets on
purpose: a drawn filter then meets the drawn metadata often enough to pass and to fail.
Needs hypothesis (a test dependency).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

KEYS = ("topic", "n", "tags", "project")
PATHS = ("topic", "n", "tags", "project", "project.phase", "project.n", "missing", "metadata.topic")
FIELDS = ("session_id", "author", "role", "timestamp")

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, 1.5, -2.5]),
    st.sampled_from(["a", "b", "travel", "Travel", "é"]),
)
nested = st.fixed_dictionaries({}, optional={"phase": scalars, "n": st.integers(-3, 3)})


def metadata() -> st.SearchStrategy[dict[str, Any]]:
    """Metadata over ``KEYS``: a scalar, a list of scalars, or (``project``) an object."""
    value = st.one_of(scalars, st.lists(scalars, max_size=3))
    return st.fixed_dictionaries(
        {}, optional={"topic": value, "n": value, "tags": st.lists(scalars, max_size=3), "project": nested}
    )


def _operand(field: str) -> st.SearchStrategy[Any]:
    if field == "timestamp":
        return st.sampled_from([100.0, 101.0, 102.0, 103.0])
    if field in ("session_id", "author", "role"):
        return st.sampled_from(["s1", "s2", "user", "model", "alice", "x"])
    return scalars


def _condition() -> st.SearchStrategy[dict[str, Any]]:
    def build(key: str) -> st.SearchStrategy[dict[str, Any]]:
        v = _operand(key)
        ordered = v.filter(lambda x: x is not None and not isinstance(x, bool))
        return st.one_of(
            v.map(lambda x: {key: x}),
            st.tuples(st.sampled_from(["$eq", "$ne"]), v).map(lambda t: {key: {t[0]: t[1]}}),
            st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(v, max_size=3)).map(lambda t: {key: {t[0]: t[1]}}),
            st.tuples(st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), ordered).map(lambda t: {key: {t[0]: t[1]}}),
            st.booleans().map(lambda b: {key: {"$exists": b}}),
        )

    return st.sampled_from(PATHS + FIELDS).flatmap(build)


def filters() -> st.SearchStrategy[dict[str, Any]]:
    """``filters=`` specs: conditions combined by ``$and``, ``$or`` and ``$not``, up to three deep."""
    return st.recursive(
        _condition(),
        lambda inner: st.one_of(
            st.lists(inner, min_size=1, max_size=3).map(lambda xs: {"$and": xs}),
            st.lists(inner, min_size=1, max_size=3).map(lambda xs: {"$or": xs}),
            inner.map(lambda x: {"$not": x}),
        ),
        max_leaves=4,
    )
