"""Anytime-valid intervals (rag_app/experiments/sequential.py): the formula by hand, coverage at every look, rates."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rag_app.experiments.comparison import srm_pvalue as srm_scalar
from rag_app.experiments.comparison import welch_interval
from rag_app.experiments.sequential import (MIN_ARM_QUERIES, Moments, cs_halfwidth, cs_pvalue, difference, sequential_rho,
                                srm_pvalue)


def test_rho_and_half_width_by_hand():
    # alpha 0.05, N_tune 5,000: -2 ln 0.05 = 5.99146; ln(6.99146) = 1.94469; rho^2 = 7.93615 / 5000
    assert sequential_rho(0.05, 5000) == pytest.approx(math.sqrt(7.93615 / 5000), rel=1e-5)
    # at n = 5,000, se = 1: n rho^2 + 1 = 8.93615; 2 * 8.93615 / (5000 * 7.93615) = 4.50378e-4;
    # ln(sqrt(8.93615) / 0.05) = ln(59.7868) = 4.09080; sqrt(4.50378e-4 * 4.09080) * sqrt(5000) = 3.0350
    assert cs_halfwidth(1.0, 5000, 0.05, 5000) == pytest.approx(3.0350, rel=1e-4)


def test_the_p_value_is_alpha_exactly_on_the_boundary():
    """1/M_n crosses alpha where the interval's edge crosses 0: the p-value and the interval agree."""
    for n, se, alpha in ((100, 0.3, 0.05), (5000, 1.0, 0.04), (10**6, 0.01, 0.0025)):
        h = float(cs_halfwidth(se, n, alpha, 5000))
        assert float(cs_pvalue(h, se, n, alpha, 5000)) == pytest.approx(alpha, rel=1e-9)
        assert float(cs_pvalue(1.01 * h, se, n, alpha, 5000)) < alpha < float(cs_pvalue(0.99 * h, se, n, alpha, 5000))


def test_the_sequence_is_wider_than_the_one_look_interval_everywhere():
    rng = np.random.default_rng(0)
    for n in (60, 500, 5000, 50_000, 10**6):
        a, b = Moments.of(rng.normal(10, 2, n // 2)), Moments.of(rng.normal(10, 2, n // 2))
        seq = difference(a, b, method="sequential")
        fixed = difference(a, b, method="fixed")
        assert seq.high - seq.low > fixed.high - fixed.low


def test_fixed_is_the_welch_interval():
    rng = np.random.default_rng(1)
    a, b = list(rng.normal(10, 2, 40)), list(rng.normal(9, 4, 60))
    ci, d = welch_interval(a, b), difference(Moments.of(a), Moments.of(b), method="fixed")
    assert (float(d.diff), float(d.low), float(d.high)) == pytest.approx((ci.diff, ci.low, ci.high))


def _looks(rng, n_paths, n_looks, per_look, draw):
    """Cumulative per-arm moments after each look, for many A/A paths at once."""
    x, y = draw(rng, (n_paths, n_looks, per_look)), draw(rng, (n_paths, n_looks, per_look))
    mom = lambda v: Moments(np.full((n_paths, n_looks), per_look) * np.arange(1, n_looks + 1),  # noqa: E731
                            np.cumsum(v.sum(axis=2), axis=1), np.cumsum((v * v).sum(axis=2), axis=1))
    return mom(x), mom(y)


@pytest.mark.parametrize("name,draw,true_diff", [
    ("normal", lambda rng, s: rng.normal(5, 2, s), 0.0),
    ("lognormal costs", lambda rng, s: rng.lognormal(0, 0.6, s), 0.0),
    ("1% events", lambda rng, s: (rng.random(s) < 0.01) * 1.0, 0.0),
])
def test_an_aa_difference_is_covered_at_every_look(name, draw, true_diff):
    """2,000 A/A paths read after every 25 queries per arm up to 2,500: the sequence misses the true
    difference (0) at any look in <= 5% of paths; the one-look interval read at every look in far more."""
    rng = np.random.default_rng(7)
    c, t = _looks(rng, 2000, 100, 25, draw)
    kind = "rate" if "events" in name else "mean"
    missed = {}
    for method in ("sequential", "fixed"):
        d = difference(c, t, kind=kind, method=method, alpha=0.05)
        with np.errstate(invalid="ignore"):
            missed[method] = float(((d.low > true_diff) | (d.high < true_diff)).any(axis=1).mean())
    assert missed["sequential"] <= 0.05, missed
    assert missed["fixed"] >= 3 * max(missed["sequential"], 0.02), missed


def test_no_failures_yet_is_not_a_zero_width_interval():
    """0 errors in 50 treatment queries does not show the error rate is 0: the rate's variance is taken
    at (k + 1) / (n + 2). With the plain sample variance both arms are 0 and the interval a point."""
    d = difference(Moments.rate(0, 450), Moments.rate(0, 50), kind="rate")
    assert d.high - d.low > 0.05
    assert float(d.low) < 0 < float(d.high)


def test_hybrid_is_sequential_until_the_end_then_fixed_each_at_half_alpha():
    rng = np.random.default_rng(2)
    a, b = Moments.of(rng.normal(10, 2, 300)), Moments.of(rng.normal(10.3, 2, 300))
    before = difference(a, b, method="hybrid", alpha=0.05, ended=False)
    after = difference(a, b, method="hybrid", alpha=0.05, ended=True)
    seq = difference(a, b, method="sequential", alpha=0.025)
    fixed = difference(a, b, method="fixed", alpha=0.025)
    assert (float(before.low), float(before.high)) == pytest.approx((float(seq.low), float(seq.high)))
    assert (float(after.low), float(after.high)) == pytest.approx((float(fixed.low), float(fixed.high)))


def test_an_arm_needs_min_queries_before_anything_is_concluded():
    few = difference(Moments.of([1.0] * (MIN_ARM_QUERIES - 1)), Moments.of([5.0] * 100))
    assert not few.valid and math.isnan(few.low) and math.isnan(few.pvalue)
    enough = difference(Moments.of([1.0, 1.1] * (MIN_ARM_QUERIES // 2)), Moments.of([5.0, 5.1] * 50))
    assert enough.valid and enough.low > 0


def test_arrays_give_what_one_experiment_at_a_time_gives():
    rng = np.random.default_rng(3)
    n = rng.integers(20, 400, (2, 50))
    xs = [[rng.normal(3, 1, k) for k in row] for row in n]
    arr = [Moments(n[i], np.array([x.sum() for x in xs[i]]), np.array([(x * x).sum() for x in xs[i]])) for i in (0, 1)]
    together = difference(arr[0], arr[1], method="hybrid", ended=np.arange(50) % 2 == 0)
    for j in range(50):
        one = difference(Moments.of(xs[0][j]), Moments.of(xs[1][j]), method="hybrid", ended=j % 2 == 0)
        got = (together.diff[j], together.low[j], together.high[j], together.pvalue[j])
        assert got == pytest.approx((float(one.diff), float(one.low), float(one.high), float(one.pvalue)), nan_ok=True)


def test_srm_arrays_match_the_scalar_check():
    assert float(srm_pvalue(900, 100, 0.1)) == pytest.approx(srm_scalar(900, 100, 0.1))
    got = srm_pvalue(np.array([900, 800, 0]), np.array([100, 200, 0]), 0.1)
    assert got[1] < 1e-6 and math.isnan(got[2])
    assert math.isnan(srm_pvalue(10, 10, 1.0)) and srm_scalar(10, 10, 1.0) is None
