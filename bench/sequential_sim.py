"""Watching a rollout after every 50 queries: how often does each method promote a change that did
nothing, and how soon does it find a real 10% cost drop? (issue 24)

Simulated live traffic goes through the code `rag experiment compare` runs (rag_app/experiments/verdict.py
`judge`, fed per-arm (n, sum, sum of squares) as the ledger's rollups give them), once per look, for
thousands of experiments at a time. Each query lands in treatment with the rollout's probability and
has a cost (log-normal, coefficient of variation ~0.6, like per-query LLM bills), a latency
(log-normal) and error / timeout / retry outcomes (2%, 1%, 3%). The experiment stops at its first
decisive verdict (promote or roll back), as a person watching the page would.

- A/A: both arms identical. Any promote is false; the default plan (sequential, alpha 0.05 split
  preferentially: 0.04 cost, 0.0025 per guardrail) against the same plan with the fixed-horizon Welch
  interval read at every look (the comparison as it was).
- A/B: treatment costs 10% less, all else equal: share detected (promoted) within the horizon, and
  the median number of queries (both arms) at the promote.

The plans ask whether a drop is established at all (min_cost_drop_pct 0): with the default 10%
practical-significance threshold a drop of exactly 10% is, by design, not promoted.

    .venv/bin/python bench/sequential_sim.py                      # 10,000 experiments each
    .venv/bin/python bench/sequential_sim.py --experiments 2000 --queries 5000
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag_app.experiments.rollout import ADVANCE, ROLLED_BACK, Ramp, step_codes  # noqa: E402
from rag_app.experiments.sequential import Moments, srm_pvalue  # noqa: E402
from rag_app.experiments.verdict import HOLD, PROMOTE, ROLL_BACK, Plan, judge  # noqa: E402

LOOK = 50  # queries between looks
COST_MEAN, COST_SIGMA = 0.0004, 0.55  # dollars per query; sigma of the log -> CV ~0.6
LATENCY_MEAN, LATENCY_SIGMA = 1200.0, 0.4  # ms
RATES = {"error_rate": 0.02, "timeout_rate": 0.01, "retry_rate": 0.03}


def simulation_plan(method: str = "sequential", **kw) -> Plan:
    """The default plan (cost primary, every other metric a guardrail), asking for any cost drop."""
    return replace(Plan(), method=method, min_cost_drop_pct=0.0, **kw)


def _lognormal(rng, mean, sigma, shape):
    return rng.lognormal(np.log(mean) - sigma ** 2 / 2, sigma, shape)  # E = mean


def traffic(rng, n_exp: int, n_queries: int, *, share: float, cost_effect: float, error_effect: float = 0.0):
    """Per-look cumulative (n, sum, sum of squares) per arm and metric: {metric: (control, treatment)}."""
    looks = n_queries // LOOK
    shape = (n_exp, looks, LOOK)
    treated = rng.random(shape) < share
    cost = _lognormal(rng, COST_MEAN, COST_SIGMA, shape) * np.where(treated, 1 + cost_effect, 1.0)
    latency = _lognormal(rng, LATENCY_MEAN, LATENCY_SIGMA, shape)
    values = {"cost_per_query": cost, "latency_ms": latency}
    for m, p in RATES.items():
        bump = error_effect if m == "error_rate" else 0.0
        values[m] = (rng.random(shape) < np.where(treated, p + bump, p)).astype(float)
    out = {}
    for arm, mask in (("control", ~treated), ("treatment", treated)):
        n = np.cumsum(mask.sum(axis=2), axis=1)
        out[arm] = {m: Moments(n, np.cumsum((v * mask).sum(axis=2), axis=1),
                               np.cumsum((v * v * mask).sum(axis=2), axis=1)) for m, v in values.items()}
    return {m: (out["control"][m], out["treatment"][m]) for m in values}


def first_decision(plan: Plan, data, srm_p) -> tuple[np.ndarray, np.ndarray]:
    """Each experiment's first decisive verdict (HOLD if none) and the look it came at (-1 if none)."""
    codes = judge(plan, data, srm_p=srm_p).verdict  # (experiments, looks)
    decisive = codes != HOLD
    look = np.where(decisive.any(axis=1), decisive.argmax(axis=1), -1)
    first = np.where(look >= 0, codes[np.arange(len(codes)), np.maximum(look, 0)], HOLD)
    return first, look


def run(n_exp: int, n_queries: int, *, share: float = 0.5, cost_effect: float = 0.0, error_effect: float = 0.0,
        plans: dict[str, Plan], seed: int = 0, chunk: int = 1000) -> dict[str, dict]:
    """Stop-at-first-verdict outcomes per plan: promote / roll back shares and queries at the promote."""
    rng = np.random.default_rng(seed)
    first = {k: [] for k in plans}
    look = {k: [] for k in plans}
    srm_alarm = []
    for start in range(0, n_exp, chunk):  # bounded memory: ~chunk * n_queries * 8 bytes per array
        m = min(chunk, n_exp - start)
        data = traffic(rng, m, n_queries, share=share, cost_effect=cost_effect, error_effect=error_effect)
        c, t = data["cost_per_query"]
        srm = srm_pvalue(c.n, t.n, share)
        srm_alarm.append((srm < next(iter(plans.values())).srm_p).any(axis=1))
        for k, plan in plans.items():
            f, lk = first_decision(plan, data, srm)
            first[k].append(f)
            look[k].append(lk)
    out = {}
    for k in plans:
        f, lk = np.concatenate(first[k]), np.concatenate(look[k])
        promoted = f == PROMOTE
        out[k] = {"promote": float(promoted.mean()), "roll_back": float((f == ROLL_BACK).mean()),
                  "median_queries_at_promote": float(np.median((lk[promoted] + 1) * LOOK)) if promoted.any() else None,
                  # the chi-square SRM check is itself read at every look: how often it ever alerts (a hold)
                  "srm_alert_ever": float(np.concatenate(srm_alarm).mean())}
    return out


def ramp_run(n_exp: int, ramp: Ramp, plan: Plan, *, cost_effect: float = 0.0, error_effect: float = 0.0,
             max_looks: int = 1000, seed: int = 0) -> dict:
    """Ramps driven look by look through rag_app/experiments/rollout.py `step_codes` on the verdict of all data so
    far. The sample-ratio check reads each step's own counts against that step's rollout (a cumulative
    count mixes the steps' shares and would always mismatch). Shares: rolled back, complete, and the
    median exposure (treatment queries) at a roll back."""
    rng = np.random.default_rng(seed)
    metrics = ("cost_per_query", "latency_ms", *RATES)
    sums = {arm: {m: np.zeros((3, n_exp)) for m in metrics} for arm in ("control", "treatment")}
    pct = np.full(n_exp, float(ramp.steps[0]))
    step_n = np.zeros((2, n_exp))
    exposure_at_rollback = np.full(n_exp, np.nan)
    for _ in range(max_looks):
        live = (pct > 0) & (pct < 100)
        if not live.any():
            break
        treated = (rng.random((n_exp, LOOK)) < (pct / 100)[:, None]) & live[:, None]
        control = ~treated & live[:, None]
        values = {"cost_per_query": _lognormal(rng, COST_MEAN, COST_SIGMA, treated.shape) * np.where(treated, 1 + cost_effect, 1.0),
                  "latency_ms": _lognormal(rng, LATENCY_MEAN, LATENCY_SIGMA, treated.shape)}
        for m, p in RATES.items():
            values[m] = (rng.random(treated.shape) < np.where(treated, p + (error_effect if m == "error_rate" else 0), p)) * 1.0
        for arm, mask in (("control", control), ("treatment", treated)):
            for m, v in values.items():
                sums[arm][m] += np.stack([mask.sum(axis=1), (v * mask).sum(axis=1), (v * v * mask).sum(axis=1)])
        step_n += np.stack([control.sum(axis=1), treated.sum(axis=1)])
        data = {m: tuple(Moments(*sums[arm][m]) for arm in ("control", "treatment")) for m in metrics}
        srm = srm_pvalue(step_n[0], step_n[1], pct / 100)
        j = judge(plan, data, srm_p=srm)
        action, new_pct = step_codes(ramp, pct, step_n[0], step_n[1], j.verdict, srm < plan.srm_p)
        action = np.where(live, action, 0)
        newly_back = live & (action == ROLLED_BACK)
        exposure_at_rollback[newly_back] = sums["treatment"]["cost_per_query"][0][newly_back]
        step_n[:, live & (action == ADVANCE)] = 0
        pct = np.where(live, new_pct, pct)
    back = pct == 0
    return {"rolled_back": float(back.mean()), "complete": float((pct >= 100).mean()),
            "median_treatment_queries_at_rollback": float(np.nanmedian(exposure_at_rollback)) if back.any() else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiments", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=10_000, help="horizon: queries (both arms) per experiment")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    plans = {"sequential (anytime-valid)": simulation_plan("sequential"),
             "fixed-horizon Welch, read at every look": simulation_plan("fixed")}
    t0 = time.process_time()
    aa = run(a.experiments, a.queries, plans=plans, seed=a.seed)
    ab = run(a.experiments, a.queries, cost_effect=-0.10, plans=plans, seed=a.seed + 1)
    print(f"{a.experiments:,} experiments per scenario, a look every {LOOK} queries up to {a.queries:,} "
          f"(50/50 split), stop at the first promote / roll back")
    print(f"{'':42} {'A/A promote':>11} {'A/A roll back':>13} {'A/B -10% found':>14} {'median q':>8}")
    for k in plans:
        med = ab[k]["median_queries_at_promote"]
        print(f"{k:42} {aa[k]['promote']:>11.1%} {aa[k]['roll_back']:>13.1%} {ab[k]['promote']:>14.1%} "
              f"{'-' if med is None else f'{med:,.0f}':>8}")
    srm = next(iter(aa.values()))["srm_alert_ever"]
    print(f"A/A experiments whose SRM check (p < 0.001) alerted at some look (a hold, never a promote): {srm:.1%}")
    ramp = Ramp((5, 25, 50, 100), min_queries_per_step=1000)
    plan = simulation_plan("sequential")
    n_ramp = max(1, a.experiments // 5)
    print(f"\nramps {list(ramp.steps)}%, >= {ramp.min_queries_per_step} queries per arm per step, "
          f"{n_ramp:,} each, a look every {LOOK} queries:")
    for name, kw in (("A/A", {}), ("errors 2% -> 4%", {"error_effect": 0.02}), ("cost +10%", {"cost_effect": 0.10})):
        r = ramp_run(n_ramp, ramp, plan, seed=a.seed + 2, **kw)
        med = r["median_treatment_queries_at_rollback"]
        print(f"  {name:16} rolled back {r['rolled_back']:6.1%}  reached 100% {r['complete']:6.1%}  median treatment "
              f"queries at the roll back {'-' if med is None else f'{med:,.0f}'}")
    print(f"CPU {time.process_time() - t0:.1f} s")


if __name__ == "__main__":
    main()
