"""Primary metric, guardrails, alpha shares and the verdict (rag_app/experiments/verdict.py), on constructed arms."""
from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from rag_app.experiments.sequential import Moments
from rag_app.experiments.verdict import HOLD, PROMOTE, ROLL_BACK, Plan, judge, verdict

N = 2000  # queries per arm: enough for a 20% cost drop to show at the primary's 96% confidence


def arms(rng, n=N, *, cost=(1e-3, 1e-3), latency=(1000.0, 1000.0), errors=(0.02, 0.02), timeouts=(0.01, 0.01),
         retries=(0.03, 0.03), cost_n=None):
    """(control, treatment) moments per metric; exact event counts, normal costs and latencies."""
    def mean_arm(mu, sd, k):
        x = rng.normal(mu, sd, k)
        return Moments.of(x)

    data = {"cost_per_query": tuple(mean_arm(m, m / 3, cost_n or n) for m in cost),
            "latency_ms": tuple(mean_arm(m, 200, n) for m in latency)}
    for name, (pc, pt) in (("error_rate", errors), ("timeout_rate", timeouts), ("retry_rate", retries)):
        data[name] = (Moments.rate(round(pc * n), n), Moments.rate(round(pt * n), n))
    return data


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def test_preferential_bonferroni_gives_the_primary_most_of_alpha_and_adds_up():
    plan = Plan()
    a = plan.alphas()
    assert a["cost_per_query"] == pytest.approx(0.04) and set(a) == {"cost_per_query", "latency_ms", "error_rate",
                                                                      "timeout_rate", "retry_rate"}
    assert all(a[g] == pytest.approx(0.0025) for g in plan.guardrails)
    assert sum(a.values()) == pytest.approx(0.05)
    two = Plan.of({"alpha": 0.1, "primary_alpha_share": 0.5, "guardrail_metrics": ["error_rate", "latency_ms"]})
    assert two.alphas() == {"cost_per_query": pytest.approx(0.05), "error_rate": pytest.approx(0.025),
                            "latency_ms": pytest.approx(0.025)}
    assert Plan.of({"guardrail_metrics": []}).alphas() == {"cost_per_query": 0.05}


def test_plan_defaults_and_the_hybrid_switch():
    plan = Plan.of(None)
    assert (plan.method, plan.n_tune, plan.primary) == ("sequential", 5000, "cost_per_query")
    assert plan.guardrails == ("latency_ms", "error_rate", "timeout_rate", "retry_rate")
    hybrid = Plan.of({"planned_end": "2026-12-01", "planned_queries": 10_000})
    assert hybrid.method == "hybrid"
    assert not hybrid.ended(9_999, date(2026, 11, 30)) and hybrid.ended(10_000, date(2026, 11, 30))
    assert hybrid.ended(10, date(2026, 12, 1))
    assert list(hybrid.ended(np.array([5, 20_000]), date(2026, 1, 1))) == [False, True]
    lat = Plan.of({"primary_metric": "latency_ms"})
    assert lat.guardrails == ("cost_per_query", "error_rate", "timeout_rate", "retry_rate")


def test_a_clear_cost_drop_is_promoted_by_the_primary(rng):
    res = verdict(Plan(), arms(rng, cost=(1e-3, 0.8e-3)))
    assert res["verdict"] == "promote" and res["decided_by"] == "cost_per_query"
    assert res["metrics"]["cost_per_query"]["status"] == "better" and "96% anytime-valid" in res["reason"]


def test_a_crossed_guardrail_rolls_back_even_a_cheaper_treatment(rng):
    res = verdict(Plan(), arms(rng, cost=(1e-3, 0.8e-3), timeouts=(0.01, 0.05)))
    assert res["verdict"] == "roll back" and res["decided_by"] == "timeout_rate"
    assert res["reason"].startswith("guardrail timeout rate is higher in treatment")
    assert "99.75% anytime-valid" in res["reason"]  # the guardrail's share: 0.05 * 0.2 / 4


def test_a_harm_rolls_back_even_under_a_sample_ratio_mismatch(rng):
    res = verdict(Plan(), arms(rng, timeouts=(0.01, 0.05)), srm_p=1e-9)
    assert res["verdict"] == "roll back" and res["decided_by"] == "timeout_rate"


def test_srm_alert_holds_and_a_warning_only_says_so(rng):
    data = arms(rng, cost=(1e-3, 0.8e-3))
    alert = verdict(Plan(), data, srm_p=1e-4)
    assert (alert["verdict"], alert["decided_by"]) == ("hold", "srm") and "sample ratio mismatch" in alert["reason"]
    warn = verdict(Plan(), data, srm_p=0.005)
    assert warn["verdict"] == "promote" and "sample ratio warning: p=0.005" in warn["reason"]


def test_an_error_rate_trending_past_its_tolerance_holds_a_promote(rng):
    # +1.5 points: beyond max_error_rate_increase (1 point) yet not established at the guardrail's 99.75%
    res = verdict(Plan(), arms(rng, cost=(1e-3, 0.8e-3), errors=(0.02, 0.035)))
    assert res["metrics"]["error_rate"]["status"] == "no difference established"
    assert (res["verdict"], res["decided_by"]) == ("hold", "error_rate") and "beyond its tolerance" in res["reason"]
    ok = verdict(Plan(), arms(rng, cost=(1e-3, 0.8e-3), errors=(0.02, 0.025)))
    assert ok["verdict"] == "promote"


def test_min_cost_drop_pct_is_the_size_a_drop_must_clear(rng):
    data = arms(rng, n=20_000, cost=(1e-3, 0.95e-3))  # a 5% drop, well established at 40,000 queries
    assert verdict(Plan(), data)["metrics"]["cost_per_query"]["status"] == "better"
    assert verdict(Plan(), data)["verdict"] == "hold"  # default: a drop must be >= 10%
    assert verdict(Plan.of(None, {"min_cost_drop_pct": 2}), data)["verdict"] == "promote"


def test_a_costlier_treatment_is_rolled_back_by_the_primary(rng):
    res = verdict(Plan(), arms(rng, cost=(1e-3, 1.2e-3)))
    assert (res["verdict"], res["decided_by"]) == ("roll back", "cost_per_query")
    assert res["reason"].startswith("cost per query is higher in treatment")


def test_latency_as_primary_decides_and_cost_becomes_a_guardrail(rng):
    plan = Plan.of({"primary_metric": "latency_ms"})
    res = verdict(plan, arms(rng, latency=(1000.0, 900.0)))
    assert (res["verdict"], res["decided_by"]) == ("promote", "latency_ms")
    assert res["metrics"]["cost_per_query"]["role"] == "guardrail"
    unpriced = verdict(plan, arms(rng, latency=(1000.0, 900.0)), unpriced_reason="treatment has 3 unpriced queries")
    assert unpriced["metrics"]["cost_per_query"]["status"] == "cost unknown (unpriced queries)"
    assert unpriced["verdict"] == "promote"  # an unknown cost never decides, nor blocks another primary


def test_unpriced_cost_holds_with_its_reason_and_too_few_queries_hold(rng):
    res = verdict(Plan(), arms(rng, cost=(1e-3, 0.5e-3)), unpriced_reason="treatment has 5 unpriced queries: ...")
    assert (res["verdict"], res["reason"]) == ("hold", "treatment has 5 unpriced queries: ...")
    few = verdict(Plan(), arms(rng, n=20, cost=(1e-3, 0.5e-3)))
    assert (few["verdict"], few["reason"]) == ("hold", "not enough queries in both arms")


def test_judge_on_arrays_matches_one_experiment_at_a_time(rng):
    cases = [dict(cost=(1e-3, 0.8e-3)), dict(cost=(1e-3, 1.2e-3)), dict(timeouts=(0.01, 0.05)), dict(),
             dict(cost=(1e-3, 0.8e-3), errors=(0.02, 0.035)), dict(n=20)]
    datas = [arms(rng, **c) for c in cases]
    srm = np.array([np.nan, 0.5, 1e-9, 1e-4, 0.2, np.nan])
    stacked = {m: tuple(Moments(*(np.array([getattr(d[m][i], f) for d in datas]) for f in ("n", "s1", "s2")))
                        for i in (0, 1)) for m in datas[0]}
    together = judge(Plan(), stacked, srm_p=srm)
    one = [judge(Plan(), d, srm_p=s) for d, s in zip(datas, srm)]
    assert list(together.verdict) == [int(j.verdict) for j in one] == [PROMOTE, ROLL_BACK, ROLL_BACK, HOLD, HOLD, HOLD]
    assert list(together.decided_by) == [int(j.decided_by) for j in one]


def test_every_verdicts_reason_speaks_only_of_that_verdict():
    """Across outcomes (promote, hold on a trend, hold unclear, hold on a mismatch, roll back on a guardrail or
    on the primary), the reason never names another verdict: the JSON, `rag experiment compare`, the dashboard
    and the ramp log say one thing."""
    from rag_app.experiments.verdict import agrees

    seen = set()
    quality = frozenset({"groundedness", "refusal_rate"})
    for seed in range(40):
        rng = np.random.default_rng(seed)
        drop = rng.choice([0.5, 1.0, 1.3])
        data = arms(rng, n=400, cost=(1e-3, 1e-3 * drop), errors=(0.02, rng.choice([0.02, 0.06])))
        pc, pt = 0.95, rng.choice([0.95, 0.85, 0.4])
        data["groundedness"] = (Moments.rate(int(pc * 400), 400), Moments.rate(int(pt * 400), 400))
        data["refusal_rate"] = (Moments.rate(8, 400), Moments.rate(int(rng.choice([8, 30])), 400))
        plan = Plan.of(None, None, quality_data=quality)
        for srm in (None, 1e-6):
            res = verdict(plan, data, srm_p=srm)
            seen.add((res["verdict"], res["decided_by"] in plan.guardrails))
            assert agrees(res["verdict"], res["reason"]), (res["verdict"], res["reason"])
    assert {"promote", "hold", "roll back"} <= {v for v, _ in seen}
