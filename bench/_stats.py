"""A paired bootstrap over questions, for every comparison the benchmark scripts print.

The seam: ``paired(a, b)`` takes two per-question score lists of the same questions (e.g. hit@5 of
a variant and of the baseline, 0/1 each) and returns the mean difference ``b - a`` with its 95%
interval; ``said(...)`` formats it as ``+0.012 [-0.004, +0.027]``. A change is "no loss beyond
noise" when the interval's low end is not below -0.01 (issue 48's rule).

Why paired and resampling questions: the two runs answer the same questions, so what varies from
one set of questions to another is the per-question difference; resampling questions (not runs)
is the noise a dev set of a few hundred questions has. Seeded: the same inputs print the same interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Resamples of the questions; 2,000 put the interval's ends within ~0.002 of their limit.
RESAMPLES = 2_000


def paired(
    a: Sequence[float], b: Sequence[float], *, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float, float]:
    """``(mean(b - a), low, high)``: the 95% interval of the mean difference over questions."""
    if len(a) != len(b):
        raise ValueError(f"paired lists differ in length: {len(a)} and {len(b)}")
    d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    if not len(d):
        return 0.0, 0.0, 0.0
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(resamples, len(d)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(d.mean()), float(low), float(high)


def said(a: Sequence[float], b: Sequence[float]) -> str:
    """``paired(a, b)`` as ``+0.012 [-0.004, +0.027]``."""
    mean, low, high = paired(a, b)
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]"


def no_loss(a: Sequence[float], b: Sequence[float], noise: float = 0.01) -> bool:
    """Whether ``b`` loses nothing against ``a`` beyond ``noise``: the interval's low end at least ``-noise``."""
    return paired(a, b)[1] >= -noise
