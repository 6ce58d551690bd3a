"""An experiment over time: the comparison `rag experiment compare` makes now, made again at the end of every
hour (or day) of the experiment, so its effect, its anytime-valid band and each guardrail's status can be
charted and one sees when the evidence became sure (`compare --over-time`, the dashboard's experiment page).

Reading the intervals at every hour is what they are for: a confidence sequence (sequential.py) covers the
true difference at every sample size at once. (With `analysis.method: fixed` it does not: a fixed-horizon
interval is valid read once, and the series says so in `valid_at_every_point`.)

One computation, two views: the same rollup sums, added up to the end of each bucket, go through the same
`judge` (verdict.py, on arrays: every bucket at once), the same `explain` and the same quality gate
(comparison.decide) at each point; the last point is the comparison of now, field for field (a test holds
them equal). Per arm, each bucket's own cost per query and groundedness (not cumulated) show what that hour
served.
"""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any

import numpy as np

from rag_app.core import RagError
from rag_app.experiments.sequential import Moments, srm_pvalue
from rag_app.experiments.variants import Experiment

EVERY = ("auto", "hour", "day")
AUTO_HOURS_UP_TO_DAYS = 7  # `auto`: hour by hour while the experiment spans at most a week, else day by day
MAX_HOUR_DAYS = 31  # hour by hour over at most a month (744 points); longer: day by day
QUALITY_MEANS = ("groundedness", "invalid_citation_rate", "refusal_rate", "feedback_score", "judge_score",
                 "judge_faithfulness")  # as Ledger.arm_quality shows them (tracing/ledger QUALITY_METRICS)


def arms_of(exp: Experiment) -> dict[str, tuple[str, str]]:
    """arm -> (variant, side): a shadow experiment's treatment is its shadow runs."""
    return {"control": (exp.control, "live"),
            "treatment": (exp.treatment, "shadow" if exp.mode == "shadow" else "live")}


def _days_spanned(buckets: list[str]) -> int:
    return (date.fromisoformat(buckets[-1][:10]) - date.fromisoformat(buckets[0][:10])).days + 1


def resolve_every(ledger, exp: Experiment, every: str) -> str:
    """`auto` -> hour or day by how long the experiment has run; a request for hours over more than
    MAX_HOUR_DAYS days is refused in one line (its answer would be thousands of points)."""
    if every not in EVERY:
        raise RagError(f"every must be one of {', '.join(EVERY)}, got {every!r}")
    if every == "day":
        return every
    days, _ = ledger.arm_series(exp.name, list(arms_of(exp).values()), "day", quality=False)
    span = _days_spanned(sorted({r["bucket"] for r in days})) if days else 1
    if every == "hour" and span > MAX_HOUR_DAYS:
        raise RagError(f"experiment {exp.name!r} spans {span} days: hour by hour covers at most {MAX_HOUR_DAYS} "
                       "days; ask for every=day (or auto)")
    return "hour" if every == "hour" or span <= AUTO_HOURS_UP_TO_DAYS else "day"


def _start(bucket: str) -> datetime:
    return datetime.fromisoformat((bucket + ":00" if "T" in bucket else bucket + "T00:00") + ":00+00:00")


def _rollout_steps(ledger, exp: Experiment, starts: list[datetime], every: str) -> tuple[np.ndarray, np.ndarray]:
    """_steps_at over the buckets that start at `starts`, with the ramp's moves from the ledger (none without a ramp)."""
    step = timedelta(hours=1) if every == "hour" else timedelta(days=1)
    return _steps_at(starts, [s + step for s in starts], exp, ledger.experiment_events(exp.name) if exp.ramp else [])


def _steps_at(starts: list[datetime], ends: list[datetime], exp: Experiment, events: list[dict]
              ) -> tuple[np.ndarray, np.ndarray]:
    """At each bucket's end: the rollout in force (the last ramp move before it, else the file's), and the first
    bucket wholly inside that step (its sample-ratio check counts from there, as the ramp's own does)."""
    first = float(events[0]["from_pct"]) if events else float(exp.rollout_pct)
    moves = [(datetime.fromisoformat(e["at"]), float(e["to_pct"])) for e in events]
    pct, since = [], []
    for end in ends:
        p, moved = first, None
        for at, to in moves:
            if at < end:
                p, moved = to, at
        pct.append(p)
        since.append(0 if moved is None else next((j for j, s in enumerate(starts) if s >= moved), len(starts)))
    return np.asarray(pct, dtype=float), np.asarray(since, dtype=int)


def _since(codes: list, at: list[str]) -> str | None:
    """When the last run of the final value began (a status that has held since then)."""
    if not codes:
        return None
    i = len(codes) - 1
    while i > 0 and codes[i - 1] == codes[-1]:
        i -= 1
    return at[i]


def timeline(ledger, exp: Experiment, plan, guard: dict, *, use_shadow: bool, every: str = "auto",
             today: date | None = None) -> dict:
    """The experiment at the end of each hour or day with data (cumulative), oldest first; columns of
    equal length, one value per point (`at`: the bucket's start, UTC)."""
    every = resolve_every(ledger, exp, every)
    arms = arms_of(exp)
    sums, quality = ledger.arm_series(exp.name, list(arms.values()), every)
    out: dict = {"every": every, "cumulative": True, "prices": "recorded",
                 "valid_at_every_point": plan.method != "fixed", "at": []}
    if not sums:
        return out
    b = _Buckets.of(sums, quality, arms)
    starts = [_start(x) for x in b.names]
    rollout, step_from = _rollout_steps(ledger, exp, starts, every)
    srm = _srm_column(b, exp, rollout, step_from)
    points = _points(plan, b, guard, srm, _ended(plan, b, starts, today), use_shadow)
    at = [s.isoformat() for s in starts]
    out.update({
        "at": at, "rollout_pct": rollout.tolist(), "srm_pvalue": [_finite_or_none(x) for x in srm],
        "queries": {a: b.cum[a]["queries"].astype(int).tolist() for a in arms},
        "metrics": _metric_columns(plan, points, at),
        "verdict": [pt["verdict"] for pt in points], "decided_by": [pt["decided_by"] for pt in points],
        "verdict_changes": _verdict_changes(points, at),
        # each bucket's own figures per arm (not cumulated): what the arm served that hour or day
        "arms": {a: b.own_figures(a, use_shadow) for a in arms},
    })
    return out


def _finite_or_none(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _srm_column(b: _Buckets, exp: Experiment, rollout: np.ndarray, step_from: np.ndarray) -> np.ndarray:
    """The sample-ratio p-value at each point, counted from the start of the ramp step in force (a split
    experiment only: a shadow one has no ratio to check)."""
    if exp.mode != "split":
        return np.full(b.n, np.nan)
    return srm_pvalue(b.since("control", "sticky_queries", step_from), b.since("treatment", "sticky_queries", step_from),
                      rollout / 100)


def _ended(plan, b: _Buckets, starts: list[datetime], today: date | None) -> np.ndarray:
    """At each point: has the plan's sample been reached, or its planned end date passed (the last point: now)."""
    dates = [s.date() for s in starts[:-1]] + [today or datetime.now(timezone.utc).date()]
    by_date = np.asarray([plan.planned_end is not None and d >= plan.planned_end for d in dates])
    return np.asarray(plan.ended(b.cum["control"]["queries"] + b.cum["treatment"]["queries"])) | by_date


def _points(plan, b: _Buckets, guard: dict, srm: np.ndarray, ended: np.ndarray, use_shadow: bool) -> list[dict]:
    """The comparison's decision at every point: one `judge` over all points at once, then each point's
    explanation and quality gate."""
    from rag_app.experiments.evidence import decide, unpriced_reason
    from rag_app.experiments.verdict import judge

    priced = "shadow_queries" if use_shadow else "priced_queries"
    unpriced = {a: b.cum[a]["queries"] - b.cum[a][priced] for a in ("control", "treatment")}
    data = b.verdict_data(plan, use_shadow)
    j = judge(plan, data, srm_p=srm, ended=ended, unpriced=(unpriced["control"] > 0) | (unpriced["treatment"] > 0))
    return [decide(plan, data, srm_p=_finite_or_none(srm[i]), ended=bool(ended[i]), judgement=j, at=i,
                   quality={a: b.quality_at(a, i) for a in ("control", "treatment")}, guard=guard,
                   unpriced_reason=unpriced_reason(int(unpriced["control"][i]), int(unpriced["treatment"][i])))
            for i in range(b.n)]


def _verdict_changes(points: list[dict], at: list[str]) -> list[dict]:
    """The points where the verdict or what decided it changed (the first point always)."""
    def key(pt: dict) -> tuple:
        return pt["verdict"], pt["decided_by"]
    return [{"at": at[i], "verdict": pt["verdict"], "decided_by": pt["decided_by"], "reason": pt["reason"]}
            for i, pt in enumerate(points) if i == 0 or key(pt) != key(points[i - 1])]


def _metric_columns(plan, points: list[dict], at: list[str]) -> dict:
    """Per metric, in the verdict's order: diff, low, high and status at each point, and since when its
    status has held."""
    out: dict[str, dict[str, Any]] = {}
    for m in plan.order:
        col = [pt["metrics"][m] for pt in points]
        out[m] = {k: [c[k] for c in col] for k in ("diff", "low", "high", "status")}
        out[m]["since"] = _since(out[m]["status"], at)
    return out


class _Buckets:
    """An experiment's per-bucket sums per arm, as arrays over the buckets (oldest first), and their
    running totals: what the comparison of now reads, at the end of every bucket."""

    def __init__(self, names: list[str], per: dict, qper: dict):
        self.names, self.n, self.per, self.qper = names, len(names), per, qper
        self.cum = {a: {k: np.cumsum(v) for k, v in per[a].items()} for a in per}
        self.qcum = {a: {m: np.cumsum(v, axis=1) for m, v in qper[a].items()} for a in qper}

    @classmethod
    def of(cls, sums: list[dict], quality: dict, arms: dict[str, tuple[str, str]]) -> _Buckets:
        names = sorted({r["bucket"] for r in sums})
        where = {b: i for i, b in enumerate(names)}
        arm_of = {v: a for a, v in arms.items()}
        return cls(names, _sums_per_arm(sums, arms, arm_of, where), _quality_per_arm(quality, arms, arm_of, where))

    def since(self, arm: str, key: str, first: np.ndarray) -> np.ndarray:
        """The running total of `key` counted from bucket `first[i]` to each point i."""
        c = np.concatenate([[0.0], self.cum[arm][key]])
        return np.maximum(c[1:] - c[first], 0)

    def verdict_data(self, plan, use_shadow: bool) -> dict:
        """(control, treatment) moments of every metric the plan reads, one value per point."""
        from rag_app.experiments.evidence import arm_moments, verdict_data
        from rag_app.experiments.verdict import METRICS

        zeros = (np.zeros(self.n),) * 3
        quality = {a: {m: tuple(self.qcum[a].get(m, zeros)) for m in METRICS if METRICS[m].quality} for a in self.qcum}
        data = verdict_data(plan, {"_moments": arm_moments(self.cum["control"])},
                            {"_moments": arm_moments(self.cum["treatment"])}, quality, use_shadow)
        return {m: tuple(Moments(*(np.broadcast_to(np.asarray(x, dtype=float), (self.n,)) for x in (mo.n, mo.s1, mo.s2)))
                         for mo in pair) for m, pair in data.items()}

    def quality_at(self, arm: str, i: int) -> dict:
        """The arm's quality at point i as Ledger.arm_quality shows it: answers scored, each metric's mean."""
        q = self.qcum[arm]
        got = {m: q[m][:, i] for m in QUALITY_MEANS if m in q and q[m][0, i] > 0}
        scored = q["invalid_citation_rate"][0, i] if "invalid_citation_rate" in q else 0
        return {"scored": int(scored), **{m: float(got[m][1] / got[m][0]) if m in got else None for m in QUALITY_MEANS}}

    def own_figures(self, arm: str, use_shadow: bool) -> dict:
        """Each bucket's own queries, cost per query (over its priced queries) and mean groundedness."""
        cost, priced = ("shadow_cost_nano_usd", "shadow_queries") if use_shadow else ("cost_nano_usd", "priced_queries")
        p, g = self.per[arm], self.qper[arm].get("groundedness", np.zeros((3, self.n)))

        def mean(total, k):
            return [None if not k[i] else float(total[i] / k[i]) for i in range(self.n)]
        return {"queries": p["queries"].astype(int).tolist(), "priced_queries": p[priced].astype(int).tolist(),
                "cost_per_query": mean(p[cost] / 1e9, p[priced]), "scored": g[0].astype(int).tolist(),
                "groundedness": mean(g[1], g[0])}


def _sums_per_arm(sums: list[dict], arms: dict, arm_of: dict, where: dict[str, int]) -> dict:
    """arm -> sum -> per-bucket array."""
    keys = [k for k in sums[0] if k not in ("bucket", "variant", "side")]
    per = {a: {k: np.zeros(len(where)) for k in keys} for a in arms}
    for r in sums:
        for k in keys:
            per[arm_of[(r["variant"], r["side"])]][k][where[r["bucket"]]] += r[k]
    return per


def _quality_per_arm(quality: dict, arms: dict, arm_of: dict, where: dict[str, int]) -> dict:
    """arm -> metric -> (3, buckets): n / sum / sum of squares; rows of other variants or buckets are not ours."""
    qper: dict = {a: {} for a in arms}
    for (b, variant, side), metrics in quality.items():
        a = arm_of.get((variant, side))
        if a is None or b not in where:
            continue
        for m, trio in metrics.items():
            qper[a].setdefault(m, np.zeros((3, len(where))))[:, where[b]] += trio
    return qper
