"""What a verdict reads of an experiment's arms, shared by the comparison of now (comparison.py) and the
same comparison at every hour of the experiment (timeline.py): each arm's moments from its rollup sums,
the moments of every metric the plan reads, the decision with its quality gate, and why cost cannot decide
when an arm has unpriced queries. Numbers or numpy arrays alike."""
from __future__ import annotations

from rag_app.experiments.sequential import Moments
from rag_app.experiments.verdict import QUALITY, explain, quality_gate, verdict


def arm_moments(s) -> dict[str, Moments]:
    """What the verdict reads of an arm: (n, sum, sum of squares) per metric, in dollars / ms / 0-1 outcomes,
    from its rollup sums `s` (numbers: the experiment now; arrays: the experiment at each point of its
    timeline, rag_app/experiments/timeline.py)."""
    n = s["queries"]
    return {
        "cost_per_query": Moments(s["priced_queries"], s["cost_nano_usd"] / 1e9, s["cost_sq"] / 1e18),
        "shadow_cost_per_query": Moments(s["shadow_queries"], s["shadow_cost_nano_usd"] / 1e9, s["shadow_sq"] / 1e18),
        "latency_ms": Moments(n, s["latency_ms"], s["latency_sq"]),
        "error_rate": Moments.rate(s["error_queries"], n),
        "timeout_rate": Moments.rate(s["timeout_queries"], n),
        "retry_rate": Moments.rate(s["retry_queries"], n),
    }


def decide(plan, data: dict, *, srm_p: float | None, ended: bool, quality: dict, guard: dict,
           unpriced_reason: str | None = None, judgement=None, at: int | tuple = ()) -> dict:
    """The verdict as people read it: the metrics' statuses and verdict (verdict.py), then the quality gate
    (its tolerances from `guard`, the experiment's guardrails). `judgement` and `at`: read from a judgement
    already made over a timeline's arrays, at one point."""
    if judgement is None:
        judged = verdict(plan, data, srm_p=srm_p, ended=ended, unpriced_reason=unpriced_reason)
    else:
        judged = explain(plan, judgement, srm_p=srm_p, ended=ended, unpriced_reason=unpriced_reason, at=at)
    return quality_gate(judged, quality["control"], quality["treatment"], guard)


def verdict_data(plan, control: dict, treatment: dict, quality_moments: dict, use_shadow: bool) -> dict:
    """(control, treatment) moments of every metric the plan reads; cost is the shadow cost when
    nothing was billed (an extractive service's prompt, priced at the model's rate)."""
    cost_name = "shadow_cost_per_query" if use_shadow else "cost_per_query"
    sides = []
    for arm, a in (("control", control), ("treatment", treatment)):
        m = {**a["_moments"], **{q: Moments(*quality_moments[arm].get(q, (0, 0.0, 0.0))) for q in QUALITY}}
        sides.append(m)
    return {k: tuple(side[cost_name if k == "cost_per_query" else k] for side in sides) for k in plan.order}


def unpriced_reason(control_unpriced: int, treatment_unpriced: int) -> str | None:
    """Why cost cannot decide, when either arm has queries whose cost is unknown."""
    parts = [f"{arm} has {n} unpriced quer{'y' if n == 1 else 'ies'}"
             for arm, n in (("treatment", treatment_unpriced), ("control", control_unpriced)) if n]
    if not parts:
        return None
    return ("; ".join(parts) + ": cost unknown (a model without a price), so no arm can win on cost. "
            "Price the model (RAG_PRICE_OVERRIDES, see `rag prices check`), run `rag reprice`, compare again")
