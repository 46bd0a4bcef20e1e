"""Exact nearest neighbours by scanning one matrix: float32, or int8 codes re-scored when large.

The seam: ``ScopeVectors(rowids, matrix)`` holds one scope's unit vectors (an engine's own
row ids beside them) and ``top(vector, n)`` gives the ``n`` best (rowid, cosine) pairs,
best first. An engine that keeps vectors itself (the local store) caches one per scope.

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

    __slots__ = ("rowids", "matrix", "_codes", "_inv_scale")

    def __init__(self, rowids: np.ndarray, matrix: np.ndarray, *, quantize: bool | None = None) -> None:
        self.rowids = rowids
        self.matrix = matrix
        self._codes: np.ndarray | None = None
        self._inv_scale: np.ndarray | None = None
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

    def _candidates(self, vector: np.ndarray, n: int) -> np.ndarray:
        """Row positions of the best ``n`` by the int8 scan (unordered)."""
        assert self._codes is not None and self._inv_scale is not None
        q = vector * self._inv_scale
        peak = float(np.abs(q).max()) or 1.0
        q8 = np.rint(q * (127.0 / peak)).astype(np.int8)
        if _simsimd is not None:
            approx = np.asarray(_simsimd.cdist(self._codes, q8[None, :], metric="dot", threads=1)).ravel()
        else:  # quantized explicitly without simsimd (tests): same arithmetic, slower
            approx = self._codes.astype(np.int32) @ q8.astype(np.int32)
        if n >= len(approx):
            return np.arange(len(approx))
        return np.argpartition(approx, len(approx) - n)[len(approx) - n :]

    def top(self, vector: np.ndarray, n: int) -> list[tuple[int, float]]:
        """The ``n`` best (rowid, cosine) pairs, best first; scores always exact float32."""
        if not len(self.rowids) or n <= 0:
            return []
        vector = np.asarray(vector, dtype=np.float32)
        if self._codes is not None:
            rows = self._candidates(vector, max(4 * n, 128))
            scores = self.matrix[rows] @ vector
        else:
            rows = None
            scores = self.matrix @ vector
        n = min(n, len(scores))
        best = np.argpartition(scores, len(scores) - n)[len(scores) - n :]
        best = best[np.argsort(-scores[best], kind="stable")]
        at = best if rows is None else rows[best]
        return [(int(self.rowids[i]), float(s)) for i, s in zip(at, scores[best], strict=True)]
