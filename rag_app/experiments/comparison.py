"""Comparing the arms of an experiment from the ledger: per-arm cost, tokens, latency and failure
rates; intervals for the differences; a sample-ratio-mismatch check; a verdict.

`compare_live` reads per-arm sums (n, sum, sum of squares) from the rollups and hands them to pure
functions: rag_app/experiments/sequential.py (anytime-valid intervals, read as often as you like) and
rag_app/experiments/verdict.py (one primary metric, the others as guardrails with their share of alpha, and a
promote / hold / roll back verdict naming the metric that decided). `differences` keeps the
fixed-horizon Welch 95% intervals it always had (valid when read once, at a planned sample size).

Guardrails (experiment config `guardrails`, defaults in rag_app/experiments/verdict.py): promote when the
primary metric (cost per query by default) is better at its confidence, by at least
`min_cost_drop_pct` for cost, and no guardrail is worse (or trending worse than
`max_error_rate_increase` for the error rate); roll back when a guardrail or the primary is worse;
else hold. A split whose arm sizes disagree with the rollout (SRM, chi-square p < `srm_p`, 0.001;
p < 0.01 is a warning) is never promoted. An arm with unpriced queries (a model with no price) has an
unknown cost: it never wins on cost, and the verdict names the reason instead of reading the missing
dollars as $0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path

from rag_app.experiments.variants import Experiment
from rag_app.experiments.evidence import arm_moments, decide, unpriced_reason, verdict_data
from rag_app.experiments.verdict import DEFAULT_GUARDRAILS


@dataclass(frozen=True)
class Interval:
    diff: float
    low: float
    high: float

    def as_dict(self) -> dict:
        return {"diff": self.diff, "ci95_low": self.low, "ci95_high": self.high}


@dataclass(frozen=True)
class Stats:
    """n, mean and sample variance of one arm's metric: all a Welch interval needs (from SQL sums)."""
    n: int
    mean: float
    var: float

    @classmethod
    def of(cls, xs: list[float]) -> Stats:
        n = len(xs)
        m = sum(xs) / n if n else 0.0
        return cls(n, m, sum((x - m) ** 2 for x in xs) / (n - 1) if n > 1 else 0.0)

    @classmethod
    def from_sums(cls, n: int, s1: float, s2: float, scale: float = 1.0) -> Stats:
        if not n:
            return cls(0, 0.0, 0.0)
        m = s1 / n
        var = max(0.0, (s2 - s1 * m) / (n - 1)) if n > 1 else 0.0  # floats: never below 0 by rounding
        return cls(n, m / scale, var / scale ** 2)


def welch_interval(a: list[float] | Stats, b: list[float] | Stats, confidence: float = 0.95) -> Interval | None:
    """CI for mean(b) - mean(a) without assuming equal variances (Welch–Satterthwaite df)."""
    from scipy.special import stdtrit  # Student t quantile; scipy.stats alone took ~0.6 s to import

    a = a if isinstance(a, Stats) else Stats.of(a)
    b = b if isinstance(b, Stats) else Stats.of(b)
    if a.n < 2 or b.n < 2:
        return None
    ma, mb, va, vb = a.mean, b.mean, a.var, b.var
    se2 = va / a.n + vb / b.n
    if se2 == 0:
        return Interval(mb - ma, mb - ma, mb - ma)
    df = se2 ** 2 / ((va / a.n) ** 2 / (a.n - 1) + (vb / b.n) ** 2 / (b.n - 1))
    t = float(stdtrit(df, 0.5 + confidence / 2))
    half = t * math.sqrt(se2)
    return Interval(mb - ma, mb - ma - half, mb - ma + half)


def srm_pvalue(n_control: int, n_treatment: int, treatment_share: float) -> float | None:
    """Chi-square goodness of fit of the observed split against the configured one (None: nothing to check)."""
    from rag_app.experiments import sequential

    p = float(sequential.srm_pvalue(n_control, n_treatment, treatment_share))
    return None if math.isnan(p) else p


def _arm(ledger, exp: Experiment, variant: str, shadow_runs: bool) -> dict:
    # Live traffic only: replayed questions, CLI asks and evals carry their own origin and would
    # otherwise inflate the arms, the SRM check and the verdict. Shadow runs are the treatment of a
    # shadow experiment. Rows from before m005 have no origin and are not counted. Sums come from the
    # day rollups, percentiles from index walks, so an arm of a million queries reads a few rows.
    a = ledger.arm(exp.name, variant, "shadow" if shadow_runs else "live")
    s, n = a.sums, a.sums["queries"]

    def pct(col: str, k: int, p: float, scale: float = 1e9):
        v = a.percentile(col, k, p)
        return None if v is None else v / scale

    def lat_pct(p: float):  # a query without a latency counts as 0 ms, as before
        return a.percentile("latency_ms", n, p, nulls_as_zero=a.latency_nulls)

    cost = Stats.from_sums(s["priced_queries"], s["cost_nano_usd"], s["cost_sq"], 1e9)
    shadow = Stats.from_sums(s["shadow_queries"], s["shadow_cost_nano_usd"], s["shadow_sq"], 1e9)
    lat = Stats.from_sums(n, s["latency_ms"], s["latency_sq"])
    errors = Stats.from_sums(n, s["error_queries"], s["error_queries"])

    def summary(st: Stats, col: str) -> dict:
        return {"mean": st.mean if st.n else None, "p50": pct(col, st.n, 50), "p95": pct(col, st.n, 95)}

    return {
        "variant": variant, "queries": n, "sticky_queries": s["sticky_queries"], "repriced_rows": a.repriced_rows,
        "unpriced_queries": n - cost.n, "unpriced_shadow_queries": n - shadow.n,
        "cost_per_query": summary(cost, "cost_nano_usd"),
        "shadow_cost_per_query": summary(shadow, "shadow_cost_nano_usd"),
        "latency_ms": {"p50": lat_pct(50), "p95": lat_pct(95)},
        "error_rate": _rate(s["error_queries"], n),
        "timeout_rate": _rate(s["timeout_queries"], n),
        "retry_rate": _rate(s["retry_queries"], n),
        "retry_waste_usd": s["waste_nano_usd"] / 1e9,
        "tokens_per_stage": a.tokens, "_cost": cost, "_shadow": shadow, "_lat": lat, "_errors": errors,
        "_moments": arm_moments(s),
    }


def _rate(k: int, n: int) -> float | None:
    return k / n if n else None


def compare_live(ledger, exp: Experiment, today: date | None = None, over_time: str | None = None,
                 srm_since: str | None = None) -> dict:
    """Both arms of a live experiment from the ledger, their differences and the verdict.
    `today` (UTC) decides whether a hybrid analysis has reached its planned_end. `over_time` ("hour", "day"
    or "auto"): with the same computation at every hour or day of the experiment under `over_time`
    (rag_app/experiments/timeline.py). `srm_since`: the sample-ratio check counts the queries since then
    (a ramp's current step: its split must match the step's percentage; the whole experiment mixes steps)."""
    from rag_app.experiments.verdict import QUALITY, Plan, srm_level

    guard = {**DEFAULT_GUARDRAILS, **(exp.guardrails or {})}
    quality, moments = arms_quality(ledger, exp)
    plan = Plan.of(exp.analysis, exp.guardrails,
                   quality_data={m for m in QUALITY if all(m in moments[arm] for arm in moments)})
    control = _arm(ledger, exp, exp.control, shadow_runs=False)
    treatment = _arm(ledger, exp, exp.treatment, shadow_runs=exp.mode == "shadow")
    use_shadow = control["_cost"].mean * control["_cost"].n + treatment["_cost"].mean * treatment["_cost"].n == 0
    sticky = (control["sticky_queries"], treatment["sticky_queries"])
    if srm_since is not None and exp.mode == "split":
        step = ledger.step_counts(exp.name, srm_since)
        sticky = tuple(step.get(v, {"sticky": 0})["sticky"] for v in (exp.control, exp.treatment))
    srm_p = srm_pvalue(*sticky, exp.rollout_pct / 100) if exp.mode == "split" else None
    srm = None if exp.mode != "split" else {"pvalue": srm_p, "flagged": srm_p is not None and srm_p < guard["srm_p"],
                                            "level": srm_level(srm_p, plan)}
    unpriced = "unpriced_shadow_queries" if use_shadow else "unpriced_queries"
    data = verdict_data(plan, control, treatment, moments, use_shadow)
    ended = bool(plan.ended(control["queries"] + treatment["queries"], today or datetime.now(timezone.utc).date()))
    judged = decide(plan, data, srm_p=srm_p, ended=ended, quality=quality, guard=guard,
                    unpriced_reason=unpriced_reason(control.get(unpriced, 0), treatment.get(unpriced, 0)))
    strip = lambda arm: {k: v for k, v in arm.items() if not k.startswith("_")}  # noqa: E731
    repriced = control["repriced_rows"] + treatment["repriced_rows"]
    out = {"experiment": exp.name, "mode": exp.mode, "rollout_pct": exp.rollout_pct,
           "cost_metric": "shadow_cost_usd" if use_shadow else "cost_usd",
           # the best figures decide: `rag reprice`'s where it re-priced a row of either arm, else as recorded
           "prices": "repriced" if repriced else "recorded", "repriced_rows": repriced,
           "arms": {"control": {**strip(control), "quality": quality["control"]},
                    "treatment": {**strip(treatment), "quality": quality["treatment"]}},
           "differences": one_look_differences(control, treatment, "_shadow" if use_shadow else "_cost"),
           "analysis": analysis_of(plan, judged["phase"]),
           "metrics": judged["metrics"],
           "srm": srm, "guardrails": guard, "verdict": judged["verdict"], "decided_by": judged["decided_by"],
           "reason": judged["reason"]}
    if over_time:
        from rag_app.experiments.timeline import timeline

        out["over_time"] = timeline(ledger, exp, plan, guard, use_shadow=use_shadow, every=over_time, today=today)
    return out


def compare_served(ledger, exp: Experiment, over_time: str | None = None, today: date | None = None) -> dict:
    """What `rag experiment compare --json` prints and GET /v1/experiments/{name} returns (one computation,
    two views): the experiment at the rollout it is served at (its ramp's last move, read from the ledger as
    every replica reads it), with the ramp's moves; `over_time`: with its timeline. After a move the sample-ratio
    check reads the current step's queries, as the ramp itself does (rag_app/experiments/ramp.py)."""
    import dataclasses

    from rag_app.experiments.rollout import Ramp

    events = ledger.experiment_events(exp.name) if exp.ramp else []
    if events:  # a ramp moved it: compare at the percentage it is served at now
        exp = dataclasses.replace(exp, rollout_pct=float(events[-1]["to_pct"]))
    res = compare_live(ledger, exp, today=today, over_time=over_time, srm_since=events[-1]["at"] if events else None)
    ramp = Ramp.of(exp.ramp)
    if ramp is not None:
        res["ramp"] = {"steps": list(ramp.steps), "min_queries_per_step": ramp.min_queries_per_step,
                       "rollout_pct": exp.rollout_pct, "step_started_at": events[-1]["at"] if events else None,
                       "events": events}
    return res


def arms_quality(ledger, exp: Experiment) -> tuple[dict, dict]:
    """Each arm's answer quality as shown, and the (n, sum, sum of squares) of each quality metric."""
    side = "shadow" if exp.mode == "shadow" else "live"
    quality = {"control": ledger.arm_quality(exp.name, exp.control, "live"),
               "treatment": ledger.arm_quality(exp.name, exp.treatment, side)}
    return quality, {arm: quality[arm].pop("_moments") for arm in quality}


def one_look_differences(control: dict, treatment: dict, cost_key: str) -> dict:
    """Fixed-horizon Welch 95% intervals: right when read once at a planned size (`metrics` holds what
    decides)."""
    out = {}
    for name, key in (("cost_per_query", cost_key), ("latency_ms", "_lat"), ("error_rate", "_errors")):
        ci = welch_interval(control[key], treatment[key])
        out[name] = ci.as_dict() if ci else None
    return out


def analysis_of(plan, phase: str) -> dict:
    """How the experiment is read: method, alpha and its split, primary and guardrails."""
    alphas = plan.alphas()
    return {"method": plan.method, "phase": phase, "alpha": plan.alpha,
            "expected_queries": plan.n_tune, "planned_queries": plan.planned_queries,
            "planned_end": plan.planned_end.isoformat() if plan.planned_end else None,
            "primary_metric": plan.primary, "guardrail_metrics": list(plan.guardrails),
            "alpha_split": {"rule": "preferential Bonferroni", "primary": alphas[plan.primary],
                            "per_guardrail": alphas[plan.guardrails[0]] if plan.guardrails else None}}


def paired_bootstrap(diffs: list[float], iterations: int = 2000, seed: int = 0) -> Interval | None:
    """95% percentile-bootstrap CI of the mean of paired differences (treatment - control)."""
    import numpy as np

    if len(diffs) < 2:
        return None
    x = np.asarray(diffs, dtype=float)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(iterations, len(x)))].mean(axis=1)
    return Interval(float(x.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5)))


@dataclass
class ReplayArm:
    """One arm's answers to the replayed questions, question by question (same order in both arms)."""
    recall: list[float] = field(default_factory=list)
    rr: list[float] = field(default_factory=list)  # reciprocal rank of the first gold passage sent
    cost: list[tuple[float | None, float | None]] = field(default_factory=list)  # (billed, shadow) dollars
    grounded: list[float | None] = field(default_factory=list)
    invalid: list[float | None] = field(default_factory=list)  # 1.0: the answer has an invalid citation

    def add(self, answer, q, corpus: Path, k: int) -> None:
        from rag_app.evaluation import covers

        def gold_in(c) -> list[bool]:
            return [covers(_rel(c.chunk.source_path, corpus), c.chunk.char_start, c.chunk.char_end, g) for g in q.gold]

        hit_at = [any(gold_in(c)) for c in answer.contexts]
        found = sum(any(col) for col in zip(*[gold_in(c) for c in answer.contexts[:k]])) if answer.contexts[:k] else 0
        self.recall.append(found / len(q.gold))
        self.rr.append(next((1 / r for r, hit in enumerate(hit_at, 1) if hit), 0.0))  # MRR over the passages sent
        self.cost.append(answer_cost(answer))  # from the answer itself: the ledger need not be reachable
        q_of = answer.quality
        self.grounded.append(None if q_of is None else q_of.groundedness)
        self.invalid.append(None if q_of is None else float(bool(q_of.invalid_citations)))

    def summary(self, k: int, idx: int, unpriced: int) -> dict:
        known = lambda xs: [x for x in xs if x is not None]  # noqa: E731
        mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
        return {f"recall@{k}": mean(self.recall), "mrr": mean(self.rr), "groundedness": mean(known(self.grounded)),
                "invalid_citation_rate": mean(known(self.invalid)),
                "cost_per_query": None if unpriced else mean(known([x[idx] for x in self.cost])),
                "unpriced_queries": unpriced}


def replay(pool, exp: Experiment, questions, corpus: Path, k: int = 5, progress=None) -> dict:
    """Run the same labelled questions through both arms; compare retrieval (recall@k, MRR), answer
    groundedness and cost on identical inputs. A groundedness drop beyond `max_quality_drop` rolls
    back (the interval wholly beyond it) or holds (the mean beyond it), before recall and cost speak."""
    guard = {**DEFAULT_GUARDRAILS, "max_recall_drop": 0.01, **(exp.guardrails or {})}
    corpus = corpus.resolve()
    arms = {"control": exp.control, "treatment": exp.treatment}
    per_arm = {arm: ReplayArm() for arm in arms}
    for arm, variant in arms.items():
        app = pool.app_for(variant)
        for i, q in enumerate(questions, 1):
            answer = app.ask(q.question, variant=variant, experiment=exp.name,
                             extra={"arm": arm, "sticky": 0, "origin": "replay"})
            per_arm[arm].add(answer, q, corpus, k)
            if progress:
                progress(f"replay {arm}", i, len(questions))
    c, t = per_arm["control"], per_arm["treatment"]
    use_shadow, idx, unpriced = _replay_cost_basis(per_arm)
    why_unpriced = unpriced_reason(unpriced["control"], unpriced["treatment"])
    cis = {f"recall@{k}": _paired(c.recall, t.recall), "mrr": _paired(c.rr, t.rr),
           "groundedness": _paired(c.grounded, t.grounded),
           "cost_per_query": None if why_unpriced else _paired([x[idx] for x in c.cost], [x[idx] for x in t.cost])}
    base = 0.0 if why_unpriced else sum(x[idx] or 0.0 for x in c.cost) / len(c.cost)
    verdict, reason = replay_verdict(guard, k, grounded_ci=cis["groundedness"], recall_ci=cis[f"recall@{k}"],
                                     cost_ci=cis["cost_per_query"], base=base, why_unpriced=why_unpriced)
    return {"experiment": exp.name, "questions": len(questions), "k": k,
            "cost_metric": "shadow_cost_usd" if use_shadow else "cost_usd",
            "arms": {arm: {"variant": v, **per_arm[arm].summary(k, idx, unpriced[arm])} for arm, v in arms.items()},
            "differences": {name: ci.as_dict() if ci else None for name, ci in cis.items()},
            "guardrails": guard, "verdict": verdict, "reason": reason}


def _replay_cost_basis(per_arm: dict[str, ReplayArm]) -> tuple[bool, int, dict[str, int]]:
    """(compare the shadow cost: nothing was billed; which of (billed, shadow) that is; unpriced answers
    per arm)."""
    use_shadow = sum(x[0] or 0 for a in per_arm.values() for x in a.cost) == 0
    idx = 1 if use_shadow else 0
    return use_shadow, idx, {arm: sum(x[idx] is None for x in a.cost) for arm, a in per_arm.items()}


def _paired(control: list, treatment: list) -> Interval | None:
    """Paired bootstrap of treatment - control, question by question, where both are known."""
    return paired_bootstrap([t - c for c, t in zip(control, treatment) if c is not None and t is not None])


def replay_verdict(guard: dict, k: int, *, grounded_ci: Interval | None, recall_ci: Interval | None,
                   cost_ci: Interval | None, base: float, why_unpriced: str | None) -> tuple[str, str]:
    """A replay's verdict, first rule that applies: answers less grounded beyond the margin, recall
    falling, cost unknown, cost falling enough (promote), cost rising (roll back), else hold."""
    drop = guard["max_quality_drop"]
    if grounded_ci and grounded_ci.diff < -drop:
        return ("roll back" if grounded_ci.high < -drop else "hold",
                f"groundedness falls by {-grounded_ci.diff:.1%}, more than its margin {drop:.0%} "
                f"(95% CI [{grounded_ci.low:+.3f}, {grounded_ci.high:+.3f}])")
    if recall_ci and recall_ci.low < -guard["max_recall_drop"]:
        return ("roll back" if recall_ci.high < 0 else "hold",
                f"recall@{k} may drop by more than {guard['max_recall_drop']:.0%} (95% CI low {recall_ci.low:.3f})")
    if why_unpriced:
        return "hold", why_unpriced
    if cost_ci and base > 0 and cost_ci.high <= -guard["min_cost_drop_pct"] / 100 * base:
        return "promote", f"cost falls by >= {guard['min_cost_drop_pct']}% and recall@{k} holds, at 95% confidence"
    if cost_ci and cost_ci.low > 0:
        return "roll back", "treatment costs more per query at 95% confidence"
    return "hold", "no difference established at 95% confidence"


def _rel(source_path: str, corpus: Path) -> str:
    try:
        return str(Path(source_path).relative_to(corpus))
    except ValueError:
        return source_path


def answer_cost(answer) -> tuple[float | None, float | None]:
    """(billed, shadow) dollars of one answer from its own priced usages, as the ledger totals them: a
    row whose cost is unknown makes the query's cost unknown, an unpriced row its shadow."""
    from rag_app.core import totals

    t = totals(answer.usage)
    return (None if t.known_cost_nano is None else t.known_cost_nano / 1e9,
            None if t.known_shadow_nano is None else t.known_shadow_nano / 1e9)
