"""Intervals for treatment - control that stay valid however often they are read (issue 24).

A fixed-horizon (Welch) 95% interval is right once, at a sample size chosen in advance. Read after
every batch of queries and acted on the first time it excludes 0, it promotes a change that did
nothing far more often than 5% of the time (bench/sequential_sim.py measures how much more). A
*confidence sequence* covers the true difference at every sample size at once, with probability
1 - alpha, so a rollout can be watched every hour and stopped whenever it is clear.

Method (what GrowthBook and Eppo ship as "sequential testing"):

- The asymptotic confidence sequence of Waudby-Smith, Arnold, Wu, McAuliffe & Ramdas, "Time-uniform
  central limit theory and asymptotic confidence sequences" (Annals of Statistics, 2024;
  arXiv:2103.06476), built on the two-sided normal-mixture boundary of Robbins (1970) as written in
  Howard, Ramdas, McAuliffe & Sekhon, "Time-uniform, nonparametric, nonasymptotic confidence
  sequences" (Annals of Statistics 49(2), 2021). Mixing exp(lambda*S_t - lambda^2*t/2) over
  lambda ~ N(0, rho^2) gives a martingale M_t = exp(rho^2 S_t^2 / (2(t rho^2 + 1))) / sqrt(t rho^2 + 1);
  Ville's inequality bounds P(exists t: M_t >= 1/alpha) by alpha, and solving for the mean gives
      half-width_t = sigma_hat * sqrt(2 (t rho^2 + 1) / (t^2 rho^2) * ln(sqrt(t rho^2 + 1) / alpha)).
- For a difference of two arms' means, as GrowthBook's gbstats does (`SequentialTwoSidedTTest`,
  `sequentialIntervalHalfwidth` in growthbook/growthbook packages/stats; docs.growthbook.io/statistics/
  sequential): t = n = n_control + n_treatment and sigma_hat^2 = n * se^2, where se^2 =
  var_c/n_c + var_t/n_t is the Welch variance of the difference. The always-valid p-value is 1/M_n.
- rho is tuned so the sequence is tightest at an expected total sample size N_tune (GrowthBook's
  "sequential tuning parameter", default 5,000; Eppo's N_tune, default 10,000), eq. 161 of the paper:
      rho = sqrt((-2 ln alpha + ln(-2 ln alpha + 1)) / N_tune).
  The same formula appears in Waudby-Smith's R code (`std_conjmix_margin`, WannabeSmith/drconfseq).
- Rates (error, timeout, retry) are means of 0/1 outcomes; their variance is taken at the
  Agresti-Caffo adjusted proportion (k + 1) / (n + 2), so an arm with no failures yet does not claim
  a zero-width interval (0 errors in 50 queries does not show the error rate is 0).
- Hybrid (Eppo's "sequential hybrid", docs.geteppo.com/statistics/confidence-intervals/analysis-methods):
  half of alpha goes to the confidence sequence until the planned end, half to one fixed-horizon
  Welch interval read at the planned end; by the union bound the two together err with probability
  <= alpha, at the price of both being slightly wider than either alone.

Everything here is a pure function of per-arm (n, sum, sum of squares), and works on numpy arrays as
well as on numbers, so the simulation drives thousands of experiments through the same code that
`rag experiment compare` runs once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_N_TUNE = 5000  # GrowthBook's default sequential tuning parameter
HYBRID_FIXED_SHARE = 0.5  # hybrid: share of alpha kept for the one fixed-horizon read at the planned end
# Below this many queries in an arm nothing is concluded: the interval rests on a central limit
# theorem, and a variance from a handful of queries can be near 0 by chance (in simulated ramps at a
# 5% rollout, 3 treatment queries with close latencies "proved" a slowdown). Shown, never acted on.
MIN_ARM_QUERIES = 30
METHODS = ("sequential", "hybrid", "fixed")


@dataclass(frozen=True)
class Moments:
    """n, sum and sum of squares of one arm's metric: numbers (one experiment) or arrays (many)."""
    n: Any
    s1: Any
    s2: Any

    @classmethod
    def of(cls, xs) -> Moments:
        x = np.asarray(xs, dtype=float)
        return cls(len(x), float(x.sum()), float((x * x).sum()))

    @classmethod
    def rate(cls, k, n) -> Moments:
        """k events out of n queries (0/1 outcomes: the sum of squares is the sum)."""
        return cls(n, k, k)

    @property
    def mean(self):
        n = np.asarray(self.n, dtype=float)
        return np.asarray(self.s1, dtype=float) / np.maximum(n, 1)

    @property
    def var(self):
        """Sample variance (n - 1 denominator); 0 below two observations, never below 0 by rounding."""
        n = np.asarray(self.n, dtype=float)
        s1, s2 = np.asarray(self.s1, dtype=float), np.asarray(self.s2, dtype=float)
        v = (s2 - s1 * s1 / np.maximum(n, 1)) / np.maximum(n - 1, 1)
        return np.where(n > 1, np.maximum(v, 0.0), 0.0)

    @property
    def adjusted_rate_var(self):
        """p(1 - p) at p = (k + 1) / (n + 2) (Agresti & Caffo 2000): positive even at 0 or n events."""
        p = (np.asarray(self.s1, dtype=float) + 1) / (np.asarray(self.n, dtype=float) + 2)
        return p * (1 - p)


@dataclass(frozen=True)
class Diff:
    """treatment - control with its interval and p-value; fields are numbers or arrays alike.

    `valid` is False where an arm has fewer than MIN_ARM_QUERIES queries: there low/high/pvalue are
    NaN and nothing may be concluded."""
    diff: Any
    low: Any
    high: Any
    pvalue: Any
    valid: Any


def sequential_rho(alpha: float, n_tune: float) -> float:
    """Mixing scale of the normal mixture that makes the sequence tightest near n = n_tune (eq. 161)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if n_tune <= 0:
        raise ValueError(f"the tuning sample size must be positive, got {n_tune}")
    la = -2 * np.log(alpha)
    return float(np.sqrt((la + np.log(la + 1)) / n_tune))


def cs_halfwidth(se, n, alpha: float, n_tune: float):
    """Half-width of the two-sided asymptotic confidence sequence for a difference whose standard
    error is `se` after `n` observations in all (sigma_hat^2 = n * se^2)."""
    rho2 = sequential_rho(alpha, n_tune) ** 2
    n = np.asarray(n, dtype=float)
    nr = n * rho2 + 1
    return np.asarray(se, dtype=float) * np.sqrt(n) * np.sqrt(2 * nr / (n * n * rho2) * np.log(np.sqrt(nr) / alpha))


def cs_pvalue(diff, se, n, alpha: float, n_tune: float):
    """Always-valid p-value 1 / M_n of H0: difference = 0; below alpha exactly when the sequence
    excludes 0 (rho is the one tuned for `alpha`, as GrowthBook does)."""
    rho2 = sequential_rho(alpha, n_tune) ** 2
    n = np.asarray(n, dtype=float)
    nr = n * rho2 + 1
    with np.errstate(divide="ignore", invalid="ignore"):
        z2 = np.where(se > 0, np.asarray(diff, dtype=float) ** 2 / np.asarray(se, dtype=float) ** 2, 0.0)
    log_m = rho2 * n * z2 / (2 * nr) - 0.5 * np.log(nr)
    return np.minimum(1.0, np.exp(-log_m))


def welch_halfwidth(va, na, vb, nb, alpha: float):
    """Half-width of the fixed-horizon Welch interval (Welch-Satterthwaite df), and that df."""
    from scipy.special import stdtrit

    se2 = va / na + vb / nb
    with np.errstate(divide="ignore", invalid="ignore"):
        df = se2 ** 2 / ((va / na) ** 2 / np.maximum(na - 1, 1) + (vb / nb) ** 2 / np.maximum(nb - 1, 1))
    df = np.where(np.isfinite(df) & (df > 0), df, 1.0)  # zero variance: the interval is a point anyway
    return stdtrit(df, 1 - alpha / 2) * np.sqrt(se2), df


def _welch_pvalue(diff, se, df):
    from scipy.special import stdtr

    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, np.abs(diff) / np.where(se > 0, se, 1), np.where(diff == 0, 0.0, np.inf))
    return 2 * stdtr(df, -t)


def difference(control: Moments, treatment: Moments, *, kind: str = "mean", method: str = "sequential",
               alpha: float = 0.05, n_tune: float = DEFAULT_N_TUNE, ended=False) -> Diff:
    """treatment - control, with the interval `method` gives at level `alpha`.

    kind: "mean" (cost, latency) or "rate" (a share of queries: the arm's s1 counts events).
    method: "sequential" (anytime-valid), "fixed" (Welch, valid read once at a planned size) or
    "hybrid" (sequential at alpha/2 until `ended`, then Welch at alpha/2).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    na, nb = np.asarray(control.n, dtype=float), np.asarray(treatment.n, dtype=float)
    valid = (na >= MIN_ARM_QUERIES) & (nb >= MIN_ARM_QUERIES)
    diff = treatment.mean - control.mean
    nan = np.full(np.broadcast(diff, valid).shape, np.nan)

    def seq(a):
        if kind == "rate":
            va, vb = control.adjusted_rate_var, treatment.adjusted_rate_var
        else:
            va, vb = control.var, treatment.var
        se = np.sqrt(va / np.maximum(na, 1) + vb / np.maximum(nb, 1))
        h = cs_halfwidth(se, na + nb, a, n_tune)
        return h, cs_pvalue(diff, se, na + nb, a, n_tune)

    def fixed(a):
        # the sample variance of 0/1 outcomes, as the fixed-horizon comparison has always used
        va, vb = control.var, treatment.var
        h, df = welch_halfwidth(va, np.maximum(na, 1), vb, np.maximum(nb, 1), a)
        return h, _welch_pvalue(diff, np.sqrt(va / np.maximum(na, 1) + vb / np.maximum(nb, 1)), df)

    with np.errstate(divide="ignore", invalid="ignore"):
        if method == "sequential":
            h, p = seq(alpha)
        elif method == "fixed":
            h, p = fixed(alpha)
        else:
            a_fixed = alpha * HYBRID_FIXED_SHARE
            hs, ps = seq(alpha - a_fixed)
            hf, pf = fixed(a_fixed)
            ended = np.asarray(ended, dtype=bool)
            h, p = np.where(ended, hf, hs), np.where(ended, pf, ps)
    low = np.where(valid, diff - h, nan)
    high = np.where(valid, diff + h, nan)
    return Diff(diff, low, high, np.where(valid, p, nan), valid)


def srm_pvalue(n_control, n_treatment, treatment_share):
    """Chi-square goodness of fit of the observed split against the configured one (1 degree of
    freedom); NaN where there is nothing to check (no queries, or a 0% / 100% rollout)."""
    from scipy.special import chdtrc

    nc, nt = np.asarray(n_control, dtype=float), np.asarray(n_treatment, dtype=float)
    share = np.asarray(treatment_share, dtype=float)
    n = nc + nt
    ec, et = n * (1 - share), n * share
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = (nc - ec) ** 2 / ec + (nt - et) ** 2 / et
        return np.where((n > 0) & (share > 0) & (share < 1), chdtrc(1, stat), np.nan)[()]
