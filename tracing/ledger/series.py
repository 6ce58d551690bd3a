"""An experiment's arms over time, hour by hour or day by day: what `rag experiment compare --over-time` and
the dashboard's experiment page chart (rag_app/experiments/timeline.py turns them into intervals).

Sums come from the rollups (dim `all` per day, dim `hour` per hour of a day, m026), so a million queries
read a few hundred rows. Quality moments are per bucket of the arm's answers: one grouped read of
query_quality and one of query_feedback, each joined to query_totals by primary key, as the arm's
headline moments are read (repository `_quality_moments`), only grouped by bucket too.
"""
from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, and_, case, func, literal, or_, select

from tracing.ledger.rollups import number
from tracing.ledger.schema import query_feedback, query_quality, query_totals, report_rollup

EVERY = ("hour", "day")
# the per-bucket sums the verdict's moments are built from (rag_app/experiments/comparison.py `_arm`)
ARM_SUMS = ("queries", "priced_queries", "cost_nano_usd", "cost_sq", "shadow_queries", "shadow_cost_nano_usd",
            "shadow_sq", "latency_ms", "latency_sq", "error_queries", "timeout_queries", "retry_queries",
            "sticky_queries")
FLOAT_SUMS = ("cost_sq", "shadow_sq", "latency_ms", "latency_sq")
# a stored quality row (source, metric) -> the metric a verdict reads and how: the mean of the values, or
# the share of answers whose value is above 0 (invalid citations: at least one; a refusal flag: 1). A signal
# the ledger does not hold yet reads as absent, never as 0.
QUALITY_READS = {("local", "groundedness"): ("groundedness", "mean"),
                 ("local", "invalid_citations"): ("invalid_citation_rate", "any"),
                 ("local", "refusal"): ("refusal_rate", "any"),
                 ("judge", "judge_score"): ("judge_score", "mean"),
                 ("judge", "faithfulness"): ("judge_faithfulness", "mean")}


def check_every(every: str) -> str:
    if every not in EVERY:
        raise ValueError(f"every must be one of {', '.join(EVERY)}, got {every!r}")
    return every


def _arms(cols, arms: Sequence[tuple[str, str]]):
    """(variant, side) pairs as one condition on `cols` (a table or subquery's columns)."""
    return or_(*(and_(cols.variant == v, cols.side == s) for v, s in arms))


def arm_sums(db: Connection, experiment: str, arms: Sequence[tuple[str, str]], every: str) -> list[dict]:
    """[{bucket, variant, side, <ARM_SUMS>}] oldest first, for the buckets where an arm has queries. A bucket
    is 'YYYY-MM-DD' (day) or 'YYYY-MM-DDTHH' (hour, UTC)."""
    r = report_rollup
    if check_every(every) == "day":
        bucket, dim = r.c.day, "all"
    else:
        bucket, dim = r.c.day + literal("T") + r.c.value, "hour"
    sums = [func.sum(r.c[c]).label(c) for c in ARM_SUMS]
    rows = db.execute(select(bucket.label("bucket"), r.c.variant, r.c.side, *sums)
                      .where(r.c.dim == dim, r.c.experiment == experiment, _arms(r.c, arms))
                      .group_by(bucket, r.c.variant, r.c.side).order_by(bucket)).mappings()
    out = []
    for row in rows:
        d = {k: (float(number(row[k])) if k in FLOAT_SUMS else int(number(row[k]))) for k in ARM_SUMS}
        if d["queries"]:  # a bucket whose queries moved away (a refold's minus) is no bucket
            out.append({"bucket": row["bucket"], "variant": row["variant"], "side": row["side"], **d})
    return out


def _bucket_of(t, every: str):
    return t.c.day if check_every(every) == "day" else func.substr(t.c.started_at, 1, 13)


def quality_sums(db: Connection, experiment: str, arms: Sequence[tuple[str, str]], every: str
                 ) -> dict[tuple[str, str, str], dict[str, tuple[int, float, float]]]:
    """{(bucket, variant, side): {metric: (n, sum, sum of squares)}} of the arm's scored answers (QUALITY_READS)
    and users' feedback (`feedback_score`, -1..1) per bucket; a bucket without a metric's data lacks it."""
    t, q, f = query_totals, query_quality, query_feedback
    bucket = _bucket_of(t, every)
    scope = [t.c.kind == "query", t.c.experiment == experiment, _arms(t.c, arms)]
    wanted = or_(*(and_(q.c.source == s, q.c.metric == m) for s, m in QUALITY_READS))
    out: dict[tuple[str, str, str], dict[str, tuple[int, float, float]]] = {}
    rows = db.execute(select(bucket, t.c.variant, t.c.side, q.c.source, q.c.metric, func.count(q.c.value),
                             func.sum(q.c.value), func.sum(q.c.value * q.c.value),
                             func.sum(case((q.c.value > 0, 1), else_=0)))
                      .select_from(q.join(t, t.c.query_id == q.c.query_id))
                      .where(*scope, q.c.value.is_not(None), wanted)
                      .group_by(bucket, t.c.variant, t.c.side, q.c.source, q.c.metric))
    for b, variant, side, source, metric, n, s1, s2, above in rows:
        name, how = QUALITY_READS[(source, metric)]
        n = int(number(n))
        if not n:
            continue
        k = float(number(above))
        out.setdefault((b, variant, side), {})[name] = (
            (n, k, k) if how == "any" else (n, float(number(s1)), float(number(s2))))
    said = db.execute(select(bucket, t.c.variant, t.c.side, func.count(f.c.score), func.sum(f.c.score),
                             func.sum(f.c.score * f.c.score))
                      .select_from(f.join(t, t.c.query_id == f.c.query_id)).where(*scope)
                      .group_by(bucket, t.c.variant, t.c.side))
    for b, variant, side, n, s1, s2 in said:
        if n:
            out.setdefault((b, variant, side), {})["feedback_score"] = (int(n), float(number(s1)), float(number(s2)))
    return out
