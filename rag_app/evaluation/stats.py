"""95% percentile-bootstrap intervals over questions: of a mean, and of a paired difference.

Resampling questions (not chunks) is the honest unit: a question set is a sample of the
questions users ask. Fixed seed, so the same inputs give the same interval.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ITERATIONS = 2000


def mean_ci(values: Sequence[float], iterations: int = ITERATIONS, seed: int = 0) -> dict:
    x = np.sort(np.asarray(values, dtype=float))  # sorted: the interval depends on the values, not their order
    if len(x) == 0:
        return {"mean": None, "ci95_low": None, "ci95_high": None, "n": 0}
    means = x[np.random.default_rng(seed).integers(0, len(x), size=(iterations, len(x)))].mean(axis=1)
    return {"mean": round(float(x.mean()), 4), "ci95_low": round(float(np.percentile(means, 2.5)), 4),
            "ci95_high": round(float(np.percentile(means, 97.5)), 4), "n": int(len(x))}


def paired_diff_ci(base: Sequence[float], new: Sequence[float], iterations: int = ITERATIONS,
                   seed: int = 0) -> dict:
    """mean(new - base) with its 95% interval; `better` only when the whole interval is above zero."""
    if len(base) != len(new):
        raise ValueError(f"paired comparison needs the same questions on both sides ({len(base)} vs {len(new)})")
    d = mean_ci([b - a for a, b in zip(base, new)], iterations, seed)
    low, high = d["ci95_low"], d["ci95_high"]
    verdict = None if low is None else ("better" if low > 0 else "worse" if high < 0 else "no difference")
    return {"diff": d["mean"], "ci95_low": low, "ci95_high": high, "n": d["n"], "verdict": verdict}
