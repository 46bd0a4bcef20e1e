"""Exact nearest neighbours by scanning one matrix: float32, or int8 codes re-scored when large.

The seam: ``ScopeVectors(rowids, matrix)`` holds one scope's unit vectors (an engine's own
row ids beside them) and ``top(vector, n)`` gives the ``n`` best (rowid, cosine) pairs,
best first; ``top(vector, n, among)`` the best of the rows at positions ``among`` only (a
filter's passing rows, ``positions(rowids)``), and ``without`` leaves rows out (the expired).
For an engine that checks a filter itself as it goes, ``approx(vector)`` is every row's score
as the scan ranks them (``ranked``: with the best by it in order) and ``pool(n)`` how many of
the best by it ``top`` re-scores: the ``pool(n)`` best passing rows by ``approx`` are exactly
what ``top(vector, n, among)`` would re-score. An engine that keeps vectors itself (the local
store) caches one per scope.

Why an int8 copy for large scopes: a float32 product over 100k x 384 reads 150 MB per
query and is bound by memory bandwidth (8-9 ms here, whatever BLAS does). From
``QUANTIZE_FROM`` rows, when ``simsimd`` is installed (the ``embeddings`` extra), the scope
also keeps int8 codes (per-dimension scale, 4x fewer bytes) scanned with SIMD integer dot
products; the best ``max(4n, 128)`` candidates are then re-scored exactly in float32, so
scores are exact and the order matches the float32 scan (recall@10 1.0 measured by
``bench/vector_latency.py``).

numpy is no dependency of the text engine: importing this module without it raises
``MissingDependencyError`` naming the ``vectors`` extra (an engine reaches it only with an
embedder, which checked for numpy already).
"""

from __future__ import annotations

from ..errors import MissingDependencyError

try:
    import numpy as np
except ImportError as exc:  # pragma: no cover - exercised by tests/unit/test_light_install.py in a child
    raise MissingDependencyError("numpy", "vectors", "Vector search") from exc

try:  # optional: SIMD int8 scans for large scopes (the ``embeddings`` extra)
    import simsimd as _simsimd
except ImportError:  # pragma: no cover - exercised when the extra is absent
    _simsimd = None  # type: ignore[assignment]

#: From this many vectors in a scope, scans run over int8 codes (below it float32 is
#: under a millisecond and quantizing would only add work).
QUANTIZE_FROM = 16_384


class ScopeVectors:
    """One scope's vectors: row ids, the float32 matrix and, when large, its int8 codes."""

    __slots__ = ("rowids", "matrix", "_codes", "_inv_scale", "_by_rowid")

    def __init__(self, rowids: np.ndarray, matrix: np.ndarray, *, quantize: bool | None = None) -> None:
        self.rowids = rowids
        self.matrix = matrix
        self._codes: np.ndarray | None = None
        self._inv_scale: np.ndarray | None = None
        self._by_rowid: tuple[np.ndarray, np.ndarray] | None = None
        if quantize is None:
            quantize = _simsimd is not None and len(rowids) >= QUANTIZE_FROM
        if quantize and len(rowids):
            # Per-dimension scale: each column uses the whole int8 range, and the query is
            # divided by the same scale, so code . query_code stays proportional to the dot.
            peak = np.maximum(np.abs(matrix).max(axis=0), 1e-12)
            scale = (127.0 / peak).astype(np.float32)
            self._codes = np.rint(matrix * scale).astype(np.int8)
            self._inv_scale = (1.0 / scale).astype(np.float32)

    @property
    def quantized(self) -> bool:
        return self._codes is not None

    def __len__(self) -> int:
        return len(self.rowids)

    def pool(self, n: int) -> int:
        """How many rows, the best by ``approx``, ``top`` re-scores to give the ``n`` best."""
        return max(4 * n, 128) if self._codes is not None else n

    def approx(self, vector: np.ndarray) -> np.ndarray:
        """Every row's score as the scan ranks them: the int8 dot product when quantized (its
        order only means something), else the exact cosine."""
        vector = np.asarray(vector, dtype=np.float32)
        if self._codes is None:
            return np.asarray(self.matrix @ vector)
        assert self._inv_scale is not None
        q = vector * self._inv_scale
        peak = float(np.abs(q).max()) or 1.0
        q8 = np.rint(q * (127.0 / peak)).astype(np.int8)
        if _simsimd is not None:
            return np.asarray(_simsimd.cdist(self._codes, q8[None, :], metric="dot", threads=1)).ravel()
        # quantized explicitly without simsimd (tests): same arithmetic, slower
        return np.asarray(self._codes.astype(np.int32) @ q8.astype(np.int32))

    def ranked(self, vector: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
        """``approx(vector)`` and the positions of the ``m`` best by it, best first."""
        approx = self.approx(vector)
        size = len(approx)
        m = min(m, size)
        best = np.argpartition(approx, size - m)[size - m :] if 0 < m < size else np.arange(size)
        return approx, best[np.argsort(-approx[best], kind="stable")]

    def positions(self, rowids: np.ndarray) -> np.ndarray:
        """The positions of those of ``rowids`` this scope holds (ascending, each once; others left out)."""
        if self._by_rowid is None:  # made once per cached scope (two threads may both make it: same answer)
            order = np.argsort(self.rowids, kind="stable")
            self._by_rowid = (self.rowids[order], order)
        ordered, order = self._by_rowid
        wanted = np.asarray(rowids, dtype=np.int64)
        if not len(ordered) or not len(wanted):
            return np.zeros(0, dtype=np.int64)
        at = np.minimum(np.searchsorted(ordered, wanted), len(ordered) - 1)
        return np.unique(order[at[ordered[at] == wanted]])

    def top(
        self,
        vector: np.ndarray,
        n: int,
        among: np.ndarray | None = None,
        approx: np.ndarray | None = None,
        without: np.ndarray | None = None,
    ) -> list[tuple[int, float]]:
        """The ``n`` best (rowid, cosine) pairs, best first, of the rows at positions ``among``
        (None: all) but those at positions ``without`` (expired records: masked in the scan, no
        copy of the matrix); scores always exact float32. ``approx``: ``self.approx(vector)``,
        when the caller has it already."""
        dead = None
        if without is not None and len(without):
            dead = np.zeros(len(self.rowids), dtype=bool)
            dead[without] = True
            if among is not None:
                among, dead = among[~dead[among]], None
        size = len(self.rowids) if among is None else len(among)
        if dead is not None:
            size -= int(dead.sum())
        if size <= 0 or n <= 0:
            return []
        vector = np.asarray(vector, dtype=np.float32)
        pool = self.pool(n)
        rows = among
        if self._codes is not None and size > pool:
            approx = self.approx(vector) if approx is None else approx
            if among is None:
                if dead is not None:  # more than ``pool`` rows are alive: the best ``pool`` are
                    approx, dead = np.where(dead, -np.inf, approx), None
                rows = np.argpartition(approx, len(approx) - pool)[len(approx) - pool :]
            else:
                part = approx[among]
                rows = among[np.argpartition(part, len(part) - pool)[len(part) - pool :]]
        scores = self.matrix @ vector if rows is None else self.matrix[rows] @ vector
        if dead is not None:  # all rows scored: the dead below every living one, ``n`` at most the living
            scores[dead] = -np.inf
        n = min(n, size)
        best = np.argpartition(scores, len(scores) - n)[len(scores) - n :]
        best = best[np.argsort(-scores[best], kind="stable")]
        at = best if rows is None else rows[best]
        return [(int(self.rowids[i]), float(s)) for i, s in zip(at, scores[best], strict=True)]
