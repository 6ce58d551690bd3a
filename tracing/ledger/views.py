"""The ledger's views as SQLAlchemy selects: one definition, compiled for each engine when a migration
creates it (`query_costs` used to be written twice, once per dialect).

    stage_calls_repriced   stage rows with the latest re-priced figures in place of the original ones
    query_costs            per-query totals over stage_calls (unpriced stays unpriced: any row whose cost
                           is unknown makes the query's cost NULL; its known part is priced_cost_nano_usd)
    query_costs_repriced   the same over stage_calls_repriced
"""
from __future__ import annotations

from sqlalchemy import ColumnElement, Select, and_, case, cast, func, literal, select
from sqlalchemy.sql import FromClause

from tracing.ledger.schema import INT, queries, repricings, stage_calls


def _count(cond) -> ColumnElement[int]:
    return func.coalesce(func.sum(case((cond, 1), else_=0)), 0)


def stage_calls_repriced() -> Select:
    s, r = stage_calls, repricings.alias("r")
    latest = select(func.max(repricings.c.id)).where(repricings.c.stage_call_id == s.c.id).scalar_subquery()
    keep = [s.c[n] for n in ("id", "query_id", "stage", "call_id", "attempt", "status", "model", "input_tokens",
                             "output_tokens", "cached_tokens", "cache_write_tokens", "reasoning_tokens", "usage_source",
                             "output_at_risk_tokens", "possibly_billed", "latency_ms", "cache_hits", "cache_misses",
                             "error", "variant", "experiment", "started_at", "ended_at")]
    return (select(*keep,
                   case((r.c.id.is_(None), s.c.cost_nano_usd), else_=r.c.cost_nano_usd).label("cost_nano_usd"),
                   case((r.c.id.is_(None), s.c.shadow_cost_nano_usd), else_=r.c.shadow_cost_nano_usd)
                   .label("shadow_cost_nano_usd"),
                   func.coalesce(r.c.price_version, s.c.price_version).label("price_version"),
                   func.coalesce(r.c.price_source, s.c.price_source).label("price_source"))
            .select_from(s.outerjoin(r, r.c.id == latest)))


def query_costs(source: FromClause) -> Select:
    """Per-query totals over `source` (stage_calls, or the stage_calls_repriced view)."""
    q, s = queries, source
    unpriced = s.c.price_source == literal("unpriced")
    return (select(
        q.c.query_id, q.c.kind, q.c.question, q.c.variant, q.c.experiment, q.c.mode, q.c.status, q.c.started_at,
        q.c.latency_ms,
        func.coalesce(func.sum(s.c.input_tokens), 0).label("input_tokens"),
        func.coalesce(func.sum(s.c.output_tokens), 0).label("output_tokens"),
        case((_count(and_(s.c.id.is_not(None), s.c.cost_nano_usd.is_(None))) > 0, None),
             else_=cast(func.coalesce(func.sum(s.c.cost_nano_usd), 0), INT)).label("cost_nano_usd"),
        cast(func.coalesce(func.sum(s.c.cost_nano_usd), 0), INT).label("priced_cost_nano_usd"),
        case((_count(unpriced) > 0, None),
             else_=cast(func.coalesce(func.sum(s.c.shadow_cost_nano_usd), 0), INT)).label("shadow_cost_nano_usd"),
        _count(unpriced).label("unpriced_rows"),
        cast(func.coalesce(func.sum(case((s.c.status.in_(("retry", "timeout", "error")), s.c.cost_nano_usd))), 0),
             INT).label("waste_nano_usd"),
        _count(s.c.status == "retry").label("retries"),
        _count(s.c.status == "timeout").label("timeouts"),
        _count(s.c.usage_source.like("estimated:%")).label("estimated_rows"),
        cast(func.coalesce(func.sum(s.c.output_at_risk_tokens), 0), INT).label("output_at_risk_tokens"),
    ).select_from(q.outerjoin(s, s.c.query_id == q.c.query_id)).group_by(q.c.query_id))
