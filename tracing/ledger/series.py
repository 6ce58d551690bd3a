"""An experiment's arms over time, hour by hour or day by day: what `rag experiment compare --over-time` and
the dashboard's experiment page chart (rag_app/experiments/timeline.py turns them into intervals).

Sums, the answers' quality among them, come from the rollups (dim `all` per day, dim `hour` per hour of a
day; m022), so an experiment of a million queries reads a few hundred rows.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, and_, func, literal, or_, select
from sqlalchemy.sql import ColumnElement

from tracing.ledger import quality_groups
from tracing.ledger.rollups import number
from tracing.ledger.schema import report_rollup

EVERY = ("hour", "day")
# the per-bucket sums the verdict's moments are built from (rag_app/experiments/comparison.py `_arm`)
ARM_SUMS = ("queries", "priced_queries", "cost_nano_usd", "cost_sq", "shadow_queries", "shadow_cost_nano_usd",
            "shadow_sq", "latency_ms", "latency_sq", "error_queries", "timeout_queries", "retry_queries",
            "sticky_queries")
FLOAT_SUMS = ("cost_sq", "shadow_sq", "latency_ms", "latency_sq")
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
    bucket: ColumnElement[Any]
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


def quality_sums(db: Connection, experiment: str, arms: Sequence[tuple[str, str]], every: str
                 ) -> dict[tuple[str, str, str], dict[str, tuple[int, float, float]]]:
    """{(bucket, variant, side): {metric: (n, sum, sum of squares)}} of the arm's scored answers and users'
    feedback per bucket, from the rollups (m022); a bucket without a metric's data lacks it."""
    r = report_rollup
    bucket, dim = (r.c.day, "all") if check_every(every) == "day" else (r.c.day + literal("T") + r.c.value, "hour")
    rows = db.execute(select(bucket.label("bucket"), r.c.variant, r.c.side, *quality_groups.quality_sums())
                      .where(r.c.dim == dim, r.c.experiment == experiment, _arms(r.c, arms))
                      .group_by(bucket, r.c.variant, r.c.side)).mappings()
    out = {}
    for row in rows:
        moments = quality_groups.moments_of(row)
        if moments:
            out[(row["bucket"], row["variant"], row["side"])] = moments
    return out
