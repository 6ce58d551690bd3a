"""One primary metric, the others as guardrails, and a promote / hold / roll back verdict (issue 24).

An experiment is judged by one primary metric (cost per query unless the experiments file's
`analysis.primary_metric` says otherwise) and guardrails (by default every other metric the ledger
holds: latency, the error, timeout and retry rates, and each answer-quality metric both arms have data
for: groundedness, invalid-citation rate, feedback score, judge score). Each metric's interval for
treatment - control comes from rag_app/experiments/sequential.py, at its share of the experiment's alpha:

- Preferential Bonferroni (Eppo's name for it): the primary gets `primary_alpha_share` of alpha
  (default 80%), the guardrails split the rest equally. With alpha 0.05 and four guardrails: 0.04 for
  the primary, 0.0025 each. By the union bound the chance that any interval misses, at any look,
  stays <= alpha, so no combination of metrics can promote or roll back an A/A test more often.

Each metric has a direction: cost, latency, failure rates and the invalid-citation rate are better
lower; groundedness, the feedback score and the judge score are better higher. "Worse" below means
worse in that direction. A quality guardrail is a non-inferiority test: it is worse only when its
whole interval lies beyond `max_quality_drop` (the margin, in the metric's unit), and trending worse
when its point estimate does.

The verdict, first rule that applies:
1. roll back: a guardrail is worse in treatment (its interval lies on the worse side of 0, or of the
   margin for a quality guardrail); the first such decides.
2. roll back: the primary is worse in treatment. A harm rolls back even under a sample-ratio
   mismatch: going back to control is always safe.
3. hold: sample ratio mismatch, chi-square p < `srm_p` (default 0.001; p < 0.01 is a warning in the
   reason only, as Statsig does). A split that disagrees with the rollout is never promoted.
4. hold: the primary is cost and an arm has unpriced queries (its cost is unknown, never $0).
5. hold: fewer than two queries in an arm.
6. promote: the primary is better in treatment (for cost: by at least `min_cost_drop_pct` of the
   control's cost) ... unless a guardrail's point estimate is worse than its tolerance
   (`max_error_rate_increase` for the error rate, `max_quality_drop` for quality; a trend not yet
   established), then hold.
7. hold: no difference established yet.

`judge` works on numpy arrays (thousands of simulated experiments at once) as on one experiment;
`verdict` is its one-experiment form with the reasons people read.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np

from rag_app.present import fmt
from rag_app.experiments.schema import METRICS as METRIC_NAMES
from rag_app.experiments.schema import Analysis
from rag_app.experiments.sequential import HYBRID_FIXED_SHARE, Diff, Moments, difference

DEFAULT_GUARDRAILS = {"min_cost_drop_pct": 10.0, "max_error_rate_increase": 0.01, "srm_p": 0.001,
                      "max_quality_drop": 0.05, "max_refusal_rate_increase": 0.05}
MIN_QUALITY_SCORED = 30  # answers scored per arm before quality can clear a promotion
SRM_WARNING_P = 0.01

PROMOTE, HOLD, ROLL_BACK = 1, 0, -1
VERDICTS = {PROMOTE: "promote", HOLD: "hold", ROLL_BACK: "roll back"}
BETTER, UNCLEAR, WORSE, NO_DATA, UNKNOWN = 1, 0, -1, 2, 3
STATUS = {BETTER: "better", UNCLEAR: "no difference established", WORSE: "worse",
          NO_DATA: "not enough data", UNKNOWN: "cost unknown (unpriced queries)"}
BY_SRM = -1  # decided_by: the sample-ratio check, not a metric


@dataclass(frozen=True)
class Metric:
    label: str
    kind: str  # mean | rate
    unit: str  # usd | ms | share | score
    better: str = "lower"  # lower | higher
    quality: bool = False  # an answer-quality metric: a guardrail only where both arms have data

    def harm(self, v):
        """How much worse treatment is (positive = worse), whichever direction is better."""
        return v if self.better == "lower" else -v


METRICS = {
    "cost_per_query": Metric("cost per query", "mean", "usd"),
    "latency_ms": Metric("latency", "mean", "ms"),
    "error_rate": Metric("error rate", "rate", "share"),
    "timeout_rate": Metric("timeout rate", "rate", "share"),
    "retry_rate": Metric("retry rate", "rate", "share"),
    "groundedness": Metric("groundedness", "mean", "share", "higher", True),
    "invalid_citation_rate": Metric("share of answers with an invalid citation", "rate", "share", "lower", True),
    "refusal_rate": Metric("share of answers that refuse", "rate", "share", "lower", True),
    "feedback_score": Metric("feedback score", "mean", "score", "higher", True),
    "judge_score": Metric("judge score", "mean", "share", "higher", True),
    "judge_faithfulness": Metric("judge faithfulness", "mean", "share", "higher", True),
}
MARGIN_KEY = {"refusal_rate": "max_refusal_rate_increase"}  # a quality metric's own margin; else max_quality_drop
QUALITY = tuple(m for m, spec in METRICS.items() if spec.quality)
assert tuple(METRICS) == METRIC_NAMES  # the schema's list and this catalogue name the same metrics


@dataclass(frozen=True)
class Plan:
    """How one experiment is read: its `analysis` block and `guardrails`, defaults filled in."""
    method: str = "sequential"
    alpha: float = 0.05
    n_tune: int = 5000
    planned_queries: int | None = None
    planned_end: date | None = None
    primary: str = "cost_per_query"
    guardrails: tuple[str, ...] = ("latency_ms", "error_rate", "timeout_rate", "retry_rate")
    primary_alpha_share: float = 0.8
    min_cost_drop_pct: float = DEFAULT_GUARDRAILS["min_cost_drop_pct"]
    tolerances: dict[str, float] = field(default_factory=lambda: {
        "error_rate": DEFAULT_GUARDRAILS["max_error_rate_increase"]})
    margins: dict[str, float] = field(default_factory=dict)  # quality guardrail -> non-inferiority margin
    srm_p: float = DEFAULT_GUARDRAILS["srm_p"]

    @classmethod
    def of(cls, analysis: dict | None, guardrails: dict | None = None,
           quality_data: frozenset[str] | set[str] = frozenset()) -> Plan:
        """`quality_data`: the quality metrics both arms have data for; by default each is a guardrail
        (none before answers are scored, so an experiment without them reads as before)."""
        a = Analysis.model_validate(analysis or {})
        g = {**DEFAULT_GUARDRAILS, **(guardrails or {})}
        planned = a.planned_queries is not None or a.planned_end is not None
        guards = tuple(a.guardrail_metrics) if a.guardrail_metrics is not None else tuple(
            m for m in METRICS if m != a.primary_metric and (m not in QUALITY or m in quality_data))
        return cls(method=a.method or ("hybrid" if planned else "sequential"), alpha=a.alpha,
                   n_tune=a.expected_queries, planned_queries=a.planned_queries,
                   planned_end=date.fromisoformat(a.planned_end) if a.planned_end else None,
                   primary=a.primary_metric, guardrails=guards, primary_alpha_share=float(a.primary_alpha_share),
                   min_cost_drop_pct=float(g["min_cost_drop_pct"]),
                   tolerances={"error_rate": float(g["max_error_rate_increase"])} if "error_rate" in guards else {},
                   margins={m: float(g[MARGIN_KEY.get(m, "max_quality_drop")]) for m in guards if m in QUALITY},
                   srm_p=float(g["srm_p"]))

    @property
    def order(self) -> tuple[str, ...]:
        return (self.primary, *self.guardrails)

    def alphas(self) -> dict[str, float]:
        """Preferential Bonferroni: the primary's share, the rest split evenly; they add up to alpha."""
        if not self.guardrails:
            return {self.primary: self.alpha}
        each = round(self.alpha * (1 - self.primary_alpha_share) / len(self.guardrails), 12)  # 0.0025, not ...96
        return {self.primary: round(self.alpha * self.primary_alpha_share, 12), **{g: each for g in self.guardrails}}

    def ended(self, total_queries, today: date | None = None):
        """Past the planned end (hybrid): both arms' queries reached planned_queries, or planned_end came."""
        out = np.zeros(np.shape(total_queries), dtype=bool)
        if self.planned_queries is not None:
            out = out | (np.asarray(total_queries) >= self.planned_queries)
        if self.planned_end is not None and today is not None and today >= self.planned_end:
            out = out | True
        return out[()]


@dataclass(frozen=True)
class Judgement:
    diffs: dict[str, Diff]
    status: dict[str, Any]  # metric -> BETTER / UNCLEAR / WORSE / NO_DATA / UNKNOWN
    verdict: Any  # PROMOTE / HOLD / ROLL_BACK
    decided_by: Any  # index into plan.order, or BY_SRM
    trending: dict[str, Any]  # guardrail -> point estimate worse than its tolerance


def _first(flags: list) -> tuple[Any, Any]:
    """(any flag set, index of the first set flag) across a list of same-shaped boolean arrays."""
    if not flags:
        return np.bool_(False), np.int64(0)
    stacked = np.stack(np.broadcast_arrays(*[np.asarray(f, dtype=bool) for f in flags]))
    return stacked.any(axis=0), stacked.argmax(axis=0)


def judge(plan: Plan, data: dict[str, tuple[Moments, Moments]], *, srm_p=np.nan, ended=False,
          unpriced=False) -> Judgement:
    """Statuses and verdict codes for (control, treatment) moments per metric; arrays in, arrays out.

    `unpriced`: an arm has queries whose cost is unknown, so cost per query cannot be judged."""
    alphas = plan.alphas()
    diffs, status = {}, {}
    for m in plan.order:
        c, t = data[m]
        d = difference(c, t, kind=METRICS[m].kind, method=plan.method, alpha=alphas[m], n_tune=plan.n_tune,
                       ended=ended)
        unknown = np.asarray(unpriced, dtype=bool) & (m == "cost_per_query")
        spec, margin = METRICS[m], plan.margins.get(m, 0.0)
        least, most = np.minimum(spec.harm(d.low), spec.harm(d.high)), np.maximum(spec.harm(d.low), spec.harm(d.high))
        # an unknown cost outranks "no data": the priced queries alone are a biased sample anyway
        with np.errstate(invalid="ignore"):  # NaN bounds (no data) compare False
            status[m] = np.select([unknown, ~np.asarray(d.valid), least > margin, most < 0],
                                  [UNKNOWN, NO_DATA, WORSE, BETTER], UNCLEAR)[()]
        diffs[m] = d
    p = plan.primary
    primary_ok = status[p] == BETTER
    if p == "cost_per_query":  # a drop must be worth it: min_cost_drop_pct of the control's cost
        base = data[p][0].mean
        with np.errstate(invalid="ignore"):
            primary_ok = primary_ok & (base > 0) & (diffs[p].high <= -plan.min_cost_drop_pct / 100 * base)
    crossed, first_crossed = _first([status[g] == WORSE for g in plan.guardrails])
    allowed = {**plan.tolerances, **plan.margins}
    trending = {g: np.asarray(diffs[g].valid) & (METRICS[g].harm(np.nan_to_num(diffs[g].diff)) > allowed[g])
                for g in plan.guardrails if g in allowed}
    trend_flags = [trending.get(g, np.False_) for g in plan.guardrails]
    any_trend, first_trend = _first(trend_flags)
    with np.errstate(invalid="ignore"):
        srm_alert = np.asarray(srm_p, dtype=float) < plan.srm_p  # NaN (nothing to check) is False
    conds = [crossed, status[p] == WORSE, srm_alert, status[p] == UNKNOWN, status[p] == NO_DATA,
             primary_ok & any_trend, primary_ok]
    verdict = np.select(conds, [ROLL_BACK, ROLL_BACK, HOLD, HOLD, HOLD, HOLD, PROMOTE], HOLD)[()]
    by = np.select(conds, [1 + first_crossed, 0, BY_SRM, 0, 0, 1 + first_trend, 0], 0)[()]
    return Judgement(diffs, status, verdict, by, trending)


# ---- one experiment, for people -----------------------------------------------------------------


def _num(v) -> float | None:
    v = float(v)
    return v if np.isfinite(v) else None


def srm_level(p: float | None, plan: Plan) -> str:
    if p is None or not np.isfinite(p):
        return "ok"
    return "alert" if p < plan.srm_p else "warning" if p < SRM_WARNING_P else "ok"


def verdict(plan: Plan, data: dict[str, tuple[Moments, Moments]], *, srm_p: float | None = None,
            ended: bool = False, unpriced_reason: str | None = None) -> dict:
    """The verdict of one experiment: per-metric intervals and statuses, which metric decided, why."""
    j = judge(plan, data, srm_p=np.nan if srm_p is None else srm_p, ended=ended, unpriced=unpriced_reason is not None)
    return explain(plan, j, srm_p=srm_p, ended=ended, unpriced_reason=unpriced_reason)


def explain(plan: Plan, j: Judgement, *, srm_p: float | None = None, ended: bool = False,
            unpriced_reason: str | None = None, at: int | tuple = ()) -> dict:
    """`verdict`'s dict from a judgement: of one experiment, or (`at`: an index) of one point of a judgement
    made over arrays (an experiment's timeline: the same statistics at every hour, read at one)."""
    pick = lambda v: np.asarray(v)[at]  # noqa: E731
    alphas = plan.alphas()
    phase = "fixed" if plan.method == "fixed" or (plan.method == "hybrid" and ended) else "sequential"
    metrics = {}
    for m in plan.order:
        d, a = j.diffs[m], alphas[m]
        if plan.method == "hybrid":  # the half of the metric's alpha this phase spends
            a = a * (HYBRID_FIXED_SHARE if phase == "fixed" else 1 - HYBRID_FIXED_SHARE)
        metrics[m] = {"role": "primary" if m == plan.primary else "guardrail", "alpha": a,
                      "method": phase, "unit": METRICS[m].unit, "better": METRICS[m].better,
                      "diff": _num(pick(d.diff)) if bool(pick(d.valid)) else None,
                      "low": _num(pick(d.low)), "high": _num(pick(d.high)), "pvalue": _num(pick(d.pvalue)),
                      "status": STATUS[int(pick(j.status[m]))]}
        if m in plan.tolerances:
            metrics[m]["tolerance"] = plan.tolerances[m]
        if m in plan.margins:  # the non-inferiority margin, shown where the error rate shows its tolerance
            metrics[m]["tolerance"] = metrics[m]["margin"] = plan.margins[m]
    code, by = int(pick(j.verdict)), int(pick(j.decided_by))
    decided_by = "srm" if by == BY_SRM else plan.order[by]
    reason = _reason(plan, metrics, code, decided_by, srm_p, unpriced_reason)
    level = srm_level(srm_p, plan)
    if level == "warning":
        reason += f" (sample ratio warning: p={srm_p:.2g}; check assignment)"
    return {"verdict": VERDICTS[code], "decided_by": decided_by, "reason": reason, "metrics": metrics,
            "phase": phase}


def _interval(r: dict) -> str:
    return f"{fmt(r['diff'], r['unit'])} [{fmt(r['low'], r['unit'])}, {fmt(r['high'], r['unit'])}]"


def _conf(r: dict) -> str:
    kind = "anytime-valid" if r["method"] == "sequential" else "fixed-horizon"
    return f"{(1 - r['alpha']) * 100:.4g}% {kind} confidence"


def _reason(plan: Plan, metrics: dict, code: int, by: str, srm_p, unpriced_reason) -> str:
    if by == "srm":
        return f"sample ratio mismatch (p={srm_p:.2g}): fix assignment before reading results"
    r, label = metrics[by], METRICS[by].label
    worse, better = ("lower", "higher") if METRICS[by].better == "higher" else ("higher", "lower")
    if code == ROLL_BACK:
        role = "guardrail " if r["role"] == "guardrail" else ""
        beyond = f" by more than its margin {fmt(r['margin'], r['unit'], signed=False)}" if "margin" in r else ""
        return f"{role}{label} is {worse} in treatment{beyond}, {_interval(r)} at {_conf(r)}"
    if r["status"] == STATUS[UNKNOWN] and unpriced_reason:
        return unpriced_reason
    if r["status"] == STATUS[NO_DATA]:
        return "not enough queries in both arms"
    if code == PROMOTE:
        drop = f"falls by >= {plan.min_cost_drop_pct}%" if by == "cost_per_query" else f"is {better} in treatment"
        return f"{label} {drop}, {_interval(r)} at {_conf(r)}; every guardrail within its tolerance"
    if r["role"] == "guardrail":  # a promotable primary held back by a guardrail trending the wrong way
        p = metrics[plan.primary]
        better_p = "higher" if METRICS[plan.primary].better == "higher" else "lower"
        return (f"{METRICS[plan.primary].label} is {better_p} ({_interval(p)}), but {label} moved "
                f"{fmt(r['diff'], r['unit'])}, beyond its tolerance {fmt(r['tolerance'], r['unit'], signed=False)} "
                f"(its interval [{fmt(r['low'], r['unit'])}, {fmt(r['high'], r['unit'])}] does not establish it yet), "
                "so the treatment waits")
    return f"{label}: difference not established at {_conf(r)}, {_interval(r)}"


VERDICT_WORDS = ("promote", "hold", "roll back", "rolled back", "promoted")


def agrees(verdict: str, reason: str) -> bool:
    """Whether a reason's words agree with its verdict: it names no other verdict (the JSON said "roll
    back" while the reason ended "hold", 0.9)."""
    low = reason.lower()
    own = {"promote": ("promote", "promoted"), "hold": ("hold",), "roll back": ("roll back", "rolled back")}[verdict]
    return not any(w in low for w in VERDICT_WORDS if w not in own)


def quality_gate(judged: dict, control: dict, treatment: dict, guard: dict) -> dict:
    """No arm is promoted on cost while its answers look worse: once both arms have MIN_QUALITY_SCORED
    scored answers, a promotion is held when the treatment's mean groundedness falls, or its share of
    answers with an invalid citation rises, by more than `max_quality_drop`, or its refusal rate rises by
    more than `max_refusal_rate_increase` (0-1), against the control's. Point estimates: evidence enough to
    wait, never to roll back (only an anytime-valid interval beyond the margin rolls back, in `verdict`).
    A roll back or a hold stands as it is. With fewer scored answers the reason says quality is not yet
    weighed."""
    enough = min(control["scored"], treatment["scored"]) >= MIN_QUALITY_SCORED
    worse = []
    for name, label, key in (("groundedness", "groundedness", "max_quality_drop"),
                             ("invalid_citation_rate", "answers with an invalid citation", "max_quality_drop"),
                             ("refusal_rate", "refusals", "max_refusal_rate_increase")):
        c, t = control.get(name), treatment.get(name)
        if not enough or c is None or t is None:
            continue
        change = (c - t) if METRICS[name].better == "higher" else (t - c)
        if change > guard[key]:
            worse.append(f"{label} {c:.0%} -> {t:.0%} (tolerance {guard[key]:.0%})")
    if worse and judged["verdict"] == VERDICTS[PROMOTE]:
        return {**judged, "verdict": VERDICTS[HOLD], "decided_by": "quality",
                "reason": f"answers look worse: {'; '.join(worse)} (point estimates, not yet established), so the "
                          f"treatment waits; {judged['reason'].removesuffix('; every guardrail within its tolerance')}"}
    if not enough:
        return {**judged, "reason": judged["reason"] + f". Answer quality not yet weighed: {control['scored']} control "
                f"and {treatment['scored']} treatment answers scored (needs {MIN_QUALITY_SCORED} each)."}
    return judged
