"""A query's share of the report rollups, in SQL: what each `query_totals` row adds to each rollup key.

    dim         value                      the sums it adds
    all         ''                         the query's (`query_sums`: its cost and, m026, its answer's quality)
    user        user_id                    "
    user_total  user_id (day '')           "   (per user over all days: `--by user` reads one row per user)
    key         api_key_id                 "
    budget      context_budget_tokens      "   (only queries that had a context budget)
    hour        the hour it started, 00-23 "   (m026: an experiment's arms hour by hour, `rag experiment
                                               compare --over-time`; `day` holds the date)
    stage       each stage with rows       that stage's rows (`_stage_part`)
    model       each model a stage used    the rows of the stages that used it; `queries` counts the query once,
                                           and only when one of them called it (not a `skipped` row)

One definition, run by the engine (set-based, no row through Python): the writer refreshes the rollups
per batch with it (rollups.fold: minus the old totals' shares, plus the new ones, one INSERT ... SELECT
... ON CONFLICT each), and reports over the N most recent queries add up the same shares of just those.
Only `kind = 'query'` rows have a share (not an ingest run, not an orphan's rows): the caller's `source`
must be restricted to them.
"""
from __future__ import annotations

from sqlalchemy import (
    Float,
    Text,
    and_,
    case,
    cast,
    func,
    literal_column,
    select,
    union_all,
)
from sqlalchemy.sql.expression import ColumnClause

from tracing.ledger.schema import (
    FLOAT_SUMS,
    MODEL_STAGES,
    ROLLUP_KEYS,
    ROLLUP_QUALITY_SUMS,
    ROLLUP_SUMS,
    STAGES,
)

_ZERO_INT: ColumnClause[int] = literal_column("0")
_ZERO_FLOAT: ColumnClause[float] = literal_column("0.0")
_EMPTY: ColumnClause[str] = literal_column("''")


def _flag(cond):
    return case((cond, 1), else_=0)


def _sq(col):
    """A square as a float: squares of nano-dollars overflow 64-bit integers."""
    return func.coalesce(cast(col, Float) * col, 0.0)


def query_sums(t) -> dict:
    """A query's sums by ROLLUP_SUMS name, from its totals row `t`."""
    cost, shadow, ctx = t.c.cost_nano_usd, t.c.shadow_cost_nano_usd, t.c.context_tokens
    lat = func.coalesce(t.c.latency_ms, 0.0)
    return {
        "queries": literal_column("1"), "priced_queries": _flag(cost.is_not(None)),
        "cost_nano_usd": func.coalesce(cost, 0), "priced_cost_nano_usd": t.c.priced_cost_nano_usd,
        "shadow_queries": _flag(shadow.is_not(None)), "shadow_cost_nano_usd": func.coalesce(shadow, 0),
        **{c: t.c[c] for c in ("stage_rows", "input_tokens", "output_tokens", "unpriced_rows", "estimated_rows",
                               "retries", "timeouts", "waste_nano_usd", "output_at_risk_tokens", "cache_hits",
                               "cache_misses", "unknown_attempts", "unknown_cost_nano_usd", "saved_cost_nano_usd",
                               "saved_unpriced")},
        "context_queries": _flag(ctx.is_not(None)), "context_tokens": func.coalesce(ctx, 0),
        "error_queries": _flag(t.c.status == "error"), "timeout_queries": _flag(t.c.timeouts > 0),
        "retry_queries": _flag(t.c.retries > 0), "sticky_queries": _flag(t.c.sticky != 0),
        "latency_ms": lat, "cost_sq": _sq(cost), "shadow_sq": _sq(shadow), "latency_sq": lat * lat,
        # every row whose shadow is known: what the stage and model shares' shadows add up to
        "shadow_part_nano_usd": t.c.shadow_sum_nano_usd,
        "cache_hit_queries": t.c.cache_hit,
        **{c: t.c[c] for c in ROLLUP_QUALITY_SUMS},  # m026: the answer's quality (no stage or model share)
    }


def _stage_part(t, st: str) -> dict:
    """What one stage's rows of a query add (the stage and model dims carry only these)."""
    cost, shadow = t.c[f"{st}_cost_nano_usd"], t.c[f"{st}_shadow_nano_usd"]
    return {"priced_cost_nano_usd": cost, "cost_nano_usd": cost, "shadow_cost_nano_usd": shadow,
            "shadow_part_nano_usd": shadow, "stage_rows": t.c[f"{st}_rows"], "input_tokens": t.c[f"{st}_input_tokens"],
            "output_tokens": t.c[f"{st}_output_tokens"], "unpriced_rows": t.c[f"{st}_unpriced_rows"]}


def _row(dim: str, value, day, t, sums: dict):
    """One branch of the union: a rollup key and every sum (0 where this dim carries none)."""
    keys = [literal_column(f"'{dim}'").label("dim"), value.label("value"), day.label("day"),
            func.coalesce(t.c.variant, _EMPTY).label("variant"), func.coalesce(t.c.experiment, _EMPTY).label("experiment"),
            t.c.side.label("side")]
    zero = lambda name: _ZERO_FLOAT if name in FLOAT_SUMS else _ZERO_INT
    return select(*keys, *(sums.get(name, zero(name)).label(name) for name in ROLLUP_SUMS)).select_from(t)


def _model_rows(t):
    """Per model: the rows of every stage that used it, a query counted once however many stages called it
    (a query whose only row of the model is `skipped`, an extractive answer naming the LLM, never called it:
    its rows are booked to the model, but it is not one of the model's queries)."""
    per_stage = union_all(*(
        select(t.c.query_id, t.c[f"{st}_model"].label("model"), t.c.day, t.c.variant, t.c.experiment, t.c.side,
               case((t.c[f"{st}_called_rows"] > 0, t.c.query_id)).label("called"),
               *(v.label(k) for k, v in _stage_part(t, st).items()))
        .where(t.c[f"{st}_rows"] > 0, t.c[f"{st}_model"].is_not(None), t.c[f"{st}_model"] != "")
        for st in MODEL_STAGES)).subquery("per_stage")
    m = per_stage
    parts = {k: func.sum(m.c[k]) for k in _stage_part(t, STAGES[0])}
    keys = (m.c.model, m.c.day, m.c.variant, m.c.experiment, m.c.side)
    grouped = select(m.c.model, m.c.day, m.c.variant, m.c.experiment, m.c.side,
                     func.count(m.c.called.distinct()).label("queries"), *(v.label(k) for k, v in parts.items())
                     ).group_by(*keys).subquery("by_model")
    return _row("model", grouped.c.model, grouped.c.day, grouped,
                {"queries": grouped.c.queries, **{k: grouped.c[k] for k in parts}})


def hour_of(t):
    """The hour of the day (UTC, '00'..'23') a query started, from its ISO `started_at`: the `hour` dim."""
    return func.coalesce(func.substr(t.c.started_at, 12, 2), _EMPTY)


def _grouped(t):
    """The queries of `t` summed per finest key (day, hour, variant, experiment, side, user, key, budget) with
    their per-stage parts: the query-level and stage dims then fan out from these groups, not from every
    query (a batch's queries share few keys; sorting 13 copies of each query cost more than the fold)."""
    q = query_sums(t)
    stage_cols = {f"{st}__{k}": v for st in STAGES
                  for k, v in {"queries": _flag(t.c[f"{st}_rows"] > 0), **_stage_part(t, st)}.items()}
    hour = hour_of(t)
    keys = (t.c.day, t.c.variant, t.c.experiment, t.c.side, t.c.user_id, t.c.api_key_id, t.c.context_budget_tokens)
    sums = (func.sum(v).label(k) for k, v in {**q, **stage_cols}.items())
    return (select(*keys, hour.label("hour"), *sums)
            .group_by(*keys, hour).cte("g").prefix_with("MATERIALIZED"))


def shares_select(source, sign: int = 1, dims: tuple[str, ...] | None = None):
    """Each rollup key's sums over the queries of `source` (a FromClause with query_totals' columns,
    `kind = 'query'` rows only), times `sign`, one row per key in key order (concurrent writers upsert
    the same keys in one order: no deadlock). `dims`: only these dims (a migration adding one)."""
    g = _grouped(source)
    q = {name: g.c[name] for name in query_sums(source)}
    user = func.coalesce(g.c.user_id, _EMPTY)
    branches = {
        "all": [_row("all", _EMPTY, g.c.day, g, q)],
        "hour": [_row("hour", g.c.hour, g.c.day, g, q)],
        "user": [_row("user", user, g.c.day, g, q)],
        "user_total": [_row("user_total", user, _EMPTY, g, q)],
        "key": [_row("key", func.coalesce(g.c.api_key_id, _EMPTY), g.c.day, g, q)],
        "budget": [_row("budget", cast(g.c.context_budget_tokens, Text), g.c.day, g, q)
                   .where(g.c.context_budget_tokens.is_not(None))],
        "stage": [_row("stage", literal_column(f"'{st}'"), g.c.day, g,
                       {k: g.c[f"{st}__{k}"] for k in ("queries", *_stage_part(source, st))})
                  .where(g.c[f"{st}__queries"] > 0) for st in STAGES],
        "model": [_model_rows(source)],
    }
    chosen = [b for dim, bs in branches.items() if dims is None or dim in dims for b in bs]
    u = union_all(*chosen).subquery("shares")
    factor: ColumnClause[int] = literal_column(str(int(sign)))
    keys = [u.c[k] for k in ROLLUP_KEYS]
    return (select(*keys, *((func.sum(u.c[name]) * factor).label(name) for name in ROLLUP_SUMS))
            .group_by(*keys).order_by(*keys))
