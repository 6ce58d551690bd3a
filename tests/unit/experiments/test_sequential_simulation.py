"""Proved by simulation (issue 24): thousands of experiments watched after every 50 queries, driven
through the verdict and ramp code `rag experiment compare` runs (rag_app/verdict.judge,
rag_app/rollout.step_codes). Small enough for a few CPU seconds; bench/sequential_sim.py runs
10,000 experiments per scenario and docs/operations.md "Watching a rollout" shows its figures."""
from __future__ import annotations

from bench.sequential_sim import ramp_run, run, simulation_plan
from rag_app.experiments.rollout import Ramp

PLANS = {"sequential": simulation_plan("sequential"), "fixed": simulation_plan("fixed")}


def test_aa_experiments_watched_every_50_queries_are_rarely_promoted():
    """A/A, 2,000 experiments, 40 looks: false promotes <= 5% with the anytime-valid intervals; the
    fixed-horizon Welch interval (what compare used to show) read at the same looks promotes far more."""
    aa = run(2000, 2000, plans=PLANS, seed=11)
    print({k: (v["promote"], v["roll_back"]) for k, v in aa.items()})
    assert aa["sequential"]["promote"] <= 0.05 and aa["sequential"]["roll_back"] <= 0.05
    assert aa["fixed"]["promote"] >= 0.08
    assert aa["fixed"]["promote"] >= 5 * max(aa["sequential"]["promote"], 0.005)


def test_a_real_10_percent_cost_drop_is_found():
    ab = run(500, 4000, cost_effect=-0.10, plans=PLANS, seed=12)
    seq = ab["sequential"]
    print(f"found {seq['promote']:.1%}, median queries at the promote {seq['median_queries_at_promote']:,.0f} "
          f"(fixed-horizon, peeking: {ab['fixed']['median_queries_at_promote']:,.0f})")
    assert seq["promote"] >= 0.8 and seq["roll_back"] <= 0.05
    assert seq["median_queries_at_promote"] < 4000


def test_ramps_roll_back_a_doubled_error_rate_and_rarely_an_aa():
    ramp = Ramp((5, 25, 50, 100), min_queries_per_step=1000)
    plan = simulation_plan("sequential")
    aa = ramp_run(300, ramp, plan, seed=13)
    bad = ramp_run(300, ramp, plan, error_effect=0.02, seed=14)
    print(aa, bad)
    assert aa["rolled_back"] <= 0.05 and aa["complete"] >= 0.95
    assert bad["rolled_back"] >= 0.8
