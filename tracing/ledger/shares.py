"""A query's share of the report rollups, in SQL: what each `query_totals` row adds to each rollup key.

    dim         value                      the sums it adds
    all         ''                         the query's (`query_sums`: its cost and, m022, its answer's quality)
    user        user_id                    "
    user_total  user_id (day '')           "   (per user over all days: `--by user` reads one row per user)
    key         api_key_id                 "
    budget      context_budget_tokens      "   (only queries that had a context budget)
    hour        the hour it started, 00-23 "   (m022: an experiment's arms hour by hour, `rag experiment
                                               compare --over-time`; `day` holds the date)
    stage       each stage with rows       that stage's rows (query_stage_totals: every stage the rows name)
    model       each model a stage used    the rows of the stages that used it; `queries` counts the query once,
                                           and only when one of them called it (not a `skipped` row)

A judge run (`kind = 'judge'`, evaluation spend) adds only the evaluation sums (runs, cost, unpriced rows) to
the keys of the all, hour, user, user_total, key, stage and model dims: evaluation spend is beside the answers' in
every breakdown, never inside their cost, cost per query or query counts.

One definition, run by the engine (set-based, no row through Python): the writer refreshes the rollups
per batch with it (rollups.fold: minus the old totals' shares, plus the new ones, one INSERT ... SELECT
... ON CONFLICT each), and reports over the N most recent queries add up the same shares of just those.
Only `kind = 'query'` rows (and judge runs, for evaluation) have a share (not an ingest run, not an
orphan's rows).
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
    ROLLUP_KEYS,
    ROLLUP_QUALITY_SUMS,
    ROLLUP_SUMS,
    query_stage_totals,
)

_ZERO_INT: ColumnClause[int] = literal_column("0")
_ZERO_FLOAT: ColumnClause[float] = literal_column("0.0")
_EMPTY: ColumnClause[str] = literal_column("''")
QUERY: ColumnClause[str] = literal_column("'query'")
JUDGE: ColumnClause[str] = literal_column("'judge'")


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
                               "saved_unpriced", "output_at_risk_nano_usd")},
        "context_queries": _flag(ctx.is_not(None)), "context_tokens": func.coalesce(ctx, 0),
        "error_queries": _flag(t.c.status == "error"), "timeout_queries": _flag(t.c.timeouts > 0),
        "retry_queries": _flag(t.c.retries > 0), "sticky_queries": _flag(t.c.sticky != 0),
        "latency_ms": lat, "cost_sq": _sq(cost), "shadow_sq": _sq(shadow), "latency_sq": lat * lat,
        # every row whose shadow is known: what the stage and model shares' shadows add up to
        "shadow_part_nano_usd": t.c.shadow_sum_nano_usd,
        "cache_hit_queries": t.c.cache_hit,
        **{c: t.c[c] for c in ROLLUP_QUALITY_SUMS},  # m022: the answer's quality (no stage or model share)
    }


def evaluation_sums(t) -> dict:
    """A judge run's sums (evaluation spend), from its totals row `t`."""
    return {"evaluation_runs": literal_column("1"), "evaluation_cost_nano_usd": t.c.priced_cost_nano_usd,
            "evaluation_unpriced_rows": t.c.unpriced_rows, "evaluation_null_cost_rows": t.c.null_cost_rows}


def _row(dim: str, value, day, t, sums: dict):
    """One branch of the union: a rollup key and every sum (0 where this dim carries none)."""
    keys = [literal_column(f"'{dim}'").label("dim"), value.label("value"), day.label("day"),
            func.coalesce(t.c.variant, _EMPTY).label("variant"), func.coalesce(t.c.experiment, _EMPTY).label("experiment"),
            t.c.side.label("side")]
    zero = lambda name: _ZERO_FLOAT if name in FLOAT_SUMS else _ZERO_INT
    return select(*keys, *(sums.get(name, zero(name)).label(name) for name in ROLLUP_SUMS)).select_from(t)


def _stage_parts(source):
    """Each (query or judge run, stage) of `source` with its rollup keys: query_stage_totals joined to the
    totals rows, every stage the rows name."""
    st = query_stage_totals
    return (select(source.c.kind, source.c.day, source.c.variant, source.c.experiment, source.c.side,
                   *(st.c[c] for c in ("query_id", "stage", "model", "rows", "input_tokens", "output_tokens",
                                       "cost_nano_usd", "shadow_nano_usd", "unpriced_rows", "null_cost_rows",
                                       "called_rows")))
            .select_from(source.join(st, st.c.query_id == source.c.query_id)).cte("sp"))


def _part_sums(p, is_query, queries, priced_queries, evaluation_runs) -> dict:
    """What a stage's or a model's rows add: the answers' figures from queries' rows, evaluation spend from
    judge runs' rows."""
    mine = lambda col: func.sum(case((is_query, col), else_=0))  # noqa: E731
    theirs = lambda col: func.sum(case((is_query, 0), else_=col))  # noqa: E731
    return {"queries": queries, "priced_queries": priced_queries,
            "priced_cost_nano_usd": mine(p.c.cost_nano_usd), "cost_nano_usd": mine(p.c.cost_nano_usd),
            "shadow_cost_nano_usd": mine(p.c.shadow_nano_usd), "shadow_part_nano_usd": mine(p.c.shadow_nano_usd),
            "stage_rows": mine(p.c.rows), "input_tokens": mine(p.c.input_tokens),
            "output_tokens": mine(p.c.output_tokens), "unpriced_rows": mine(p.c.unpriced_rows),
            "evaluation_runs": evaluation_runs, "evaluation_cost_nano_usd": theirs(p.c.cost_nano_usd),
            "evaluation_unpriced_rows": theirs(p.c.unpriced_rows),
            "evaluation_null_cost_rows": theirs(p.c.null_cost_rows)}


def _stage_rows(p):
    """Per stage: the rows of that stage; `queries` counts the queries that had it, `priced_queries` those
    whose rows of it are all priced."""
    is_query = p.c.kind == QUERY
    keys = (p.c.stage, p.c.day, p.c.variant, p.c.experiment, p.c.side)
    sums = _part_sums(p, is_query, func.sum(_flag(is_query)), func.sum(_flag(and_(is_query, p.c.null_cost_rows == 0))),
                      func.sum(_flag(~is_query)))
    g = select(*keys, *(v.label(k) for k, v in sums.items())).group_by(*keys).subquery("by_stage")
    return _row("stage", g.c.stage, g.c.day, g, {k: g.c[k] for k in sums})


def _model_rows(p):
    """Per model: the rows of every stage that used it, a query counted once however many stages called it
    (a query whose only row of the model is `skipped`, an extractive answer naming the LLM, never called it:
    its rows are booked to the model, but it is not one of the model's queries)."""
    is_query = p.c.kind == QUERY
    called = p.c.called_rows > 0
    keys = (p.c.model, p.c.day, p.c.variant, p.c.experiment, p.c.side)
    queries = func.count(case((and_(is_query, called), p.c.query_id)).distinct())
    unknown = func.count(case((and_(is_query, called, p.c.null_cost_rows > 0), p.c.query_id)).distinct())
    sums = _part_sums(p, is_query, queries, queries - unknown,
                      func.count(case((and_(~is_query, called), p.c.query_id)).distinct()))
    g = (select(*keys, *(v.label(k) for k, v in sums.items()))
         .where(p.c.model.is_not(None), p.c.model != "").group_by(*keys).subquery("by_model"))
    return _row("model", g.c.model, g.c.day, g, {k: g.c[k] for k in sums})


def hour_of(t):
    """The hour of the day (UTC, '00'..'23') a query started, from its ISO `started_at`: the `hour` dim."""
    return func.coalesce(func.substr(t.c.started_at, 12, 2), _EMPTY)


def _grouped(t, sums: dict, name: str):
    """The rows of `t` summed per finest key (day, hour, variant, experiment, side, user, key, budget): the
    query-level dims then fan out from these groups, not from every query (a batch's queries share few keys;
    sorting 13 copies of each query cost more than the fold)."""
    hour = hour_of(t)
    keys = (t.c.day, t.c.variant, t.c.experiment, t.c.side, t.c.user_id, t.c.api_key_id, t.c.context_budget_tokens)
    return (select(*keys, hour.label("hour"), *(func.sum(v).label(k) for k, v in sums.items()))
            .group_by(*keys, hour).cte(name).prefix_with("MATERIALIZED"))


def _who_rows(g, sums: dict, budget: bool) -> dict[str, list]:
    """The query-level dims' branches, by dim."""
    user = func.coalesce(g.c.user_id, _EMPTY)
    rows = {"all": [_row("all", _EMPTY, g.c.day, g, sums)], "hour": [_row("hour", g.c.hour, g.c.day, g, sums)],
            "user": [_row("user", user, g.c.day, g, sums)], "user_total": [_row("user_total", user, _EMPTY, g, sums)],
            "key": [_row("key", func.coalesce(g.c.api_key_id, _EMPTY), g.c.day, g, sums)]}
    if budget:
        rows["budget"] = [_row("budget", cast(g.c.context_budget_tokens, Text), g.c.day, g, sums)
                          .where(g.c.context_budget_tokens.is_not(None))]
    return rows


def shares_select(source, sign: int = 1, dims: tuple[str, ...] | None = None):
    """Each rollup key's sums over the queries (and judge runs) of `source` (a FromClause with query_totals'
    columns), times `sign`, one row per key in key order (concurrent writers upsert the same keys in one
    order: no deadlock). `dims`: only these dims (a migration adding one)."""
    answers = select(source).where(source.c.kind == QUERY).subquery("tq")
    judged = select(source).where(source.c.kind == JUDGE).subquery("tj")
    g = _grouped(answers, query_sums(answers), "g")
    e = _grouped(judged, evaluation_sums(judged), "ge")
    branches: dict[str, list] = {}
    for rows in (_who_rows(g, {name: g.c[name] for name in query_sums(answers)}, budget=True),
                 _who_rows(e, {name: e.c[name] for name in evaluation_sums(judged)}, budget=False)):
        for dim, bs in rows.items():
            branches.setdefault(dim, []).extend(bs)
    if dims is None or {"stage", "model"} & set(dims):
        parts = _stage_parts(source)
        branches.update(stage=[_stage_rows(parts)], model=[_model_rows(parts)])
    chosen = [b for dim, bs in branches.items() if dims is None or dim in dims for b in bs]
    u = union_all(*chosen).subquery("shares")
    factor: ColumnClause[int] = literal_column(str(int(sign)))
    keys = [u.c[k] for k in ROLLUP_KEYS]
    return (select(*keys, *((func.sum(u.c[name]) * factor).label(name) for name in ROLLUP_SUMS))
            .group_by(*keys).order_by(*keys))
