"""Report totals kept up to date as the ledger is written, so no report reads every row.

    query_totals         one row per query id seen in `queries` or `stage_calls`: the per-query figures
                         (NULL cost when any row is unpriced, never $0), per-stage sums and models, who
                         and when; the stage and model dims book each stage's rows to that stage's model
                         (retrieve's included, so the rescore embedding is in the per-model sums)
    report_rollup        sums per (dim, value, day, variant, experiment, side) for dims all, user, key,
                         budget, stage, model over `kind = 'query'` rows; reports add up a few thousand
                         of these instead of millions of stage rows; sums of squares give Welch intervals

How they stay right: triggers mark a query dirty whenever any of its rows is inserted, updated or
deleted, by whoever (tracing/ledger/migrations.py m009), and `fold(conn, ids)` recomputes those queries
from their rows: the per-query aggregate is SQL (one definition below, used for one query or all of
them), and a query's share of the rollups is a function of its totals, in SQL too (shares.py), so the
rollups lose the old totals' shares and gain the new ones, set-based in the engine (no row goes
through Python: folding in Python cost the SQLite writer half its speed). It is idempotent, right under the `started` -> final upsert
of LLM attempts and under spill replays. The writer folds its batch's queries in the batch's own
transaction, plus a slice of any backlog (rows written around it, or a migration's back-fill), so the
backlog drains a batch at a time and never holds the ledger. On PostgreSQL concurrent writers take a
transaction-scoped advisory lock per query id (in one sorted order) before folding it.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from decimal import Decimal
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    Connection,
    Text,
    and_,
    bindparam,
    case,
    cast,
    delete,
    func,
    literal,
    literal_column,
    select,
    text,
    true,
    union,
)
from sqlalchemy.dialects import postgresql, sqlite

from tracing.ledger.schema import (
    MODEL_STAGES,
    ROLLUP_KEYS,
    ROLLUP_SUMS,
    STAGES,
    ledger_state,
    queries,
    query_feedback,
    query_quality,
    query_stage_totals,
    query_totals,
    report_rollup,
    rollup_dirty,
    stage_calls,
)
from tracing.ledger.shares import shares_select

log = logging.getLogger(__name__)
CHUNK = 400  # query ids per statement: well under SQLite's and PostgreSQL's bound-parameter limits
LIVE, SHADOW = "live", "shadow"
UNKNOWN_STATUSES = ("started", "unknown")
FOLD_LOCK_CLASS = 0x7261  # pg_advisory_xact_lock(class, hashtext(query_id)) while folding a query
_EMBED_STAGES = ("embed_query", "retrieve")  # whose rows count embedding-cache hits (retrieve: rescore's)


def number(v: Any) -> Any:
    """A SUM as Python sees it on either engine: PostgreSQL's SUM of integers is numeric (Decimal)."""
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    return 0 if v is None else v


def _n(cond) -> Any:
    return func.coalesce(func.sum(case((cond, 1), else_=0)), 0)


def _sum(expr) -> Any:
    return func.coalesce(func.sum(expr), 0)


def _stage_aggregates(s) -> list:
    """Per-query figures over its stage rows `s` (a stage_calls alias), labelled as query_totals columns."""
    unpriced = s.c.price_source == "unpriced"
    out = [
        func.count().label("stage_rows"),
        _sum(s.c.input_tokens).label("input_tokens"),
        _sum(s.c.output_tokens).label("output_tokens"),
        _n(s.c.cost_nano_usd.is_(None)).label("null_cost_rows"),
        _sum(s.c.cost_nano_usd).label("priced_cost_nano_usd"),
        _sum(s.c.shadow_cost_nano_usd).label("shadow_sum_nano_usd"),
        _n(unpriced).label("unpriced_rows"),
        _sum(case((s.c.status.in_(("retry", "timeout", "error")), s.c.cost_nano_usd))).label("waste_nano_usd"),
        _n(s.c.status == "retry").label("retries"),
        _n(s.c.status == "timeout").label("timeouts"),
        _n(s.c.usage_source.like("estimated:%")).label("estimated_rows"),
        _sum(s.c.output_at_risk_tokens).label("output_at_risk_tokens"),
        _sum(case((s.c.stage.in_(_EMBED_STAGES), s.c.cache_hits))).label("cache_hits"),
        _sum(case((s.c.stage.in_(_EMBED_STAGES), s.c.cache_misses))).label("cache_misses"),
        func.max(case((s.c.stage == "generate", s.c.context_tokens))).label("context_tokens"),
        func.max(case((and_(s.c.stage == "generate", s.c.context_tokens.is_not(None)), s.c.context_budget_tokens)))
        .label("context_budget_tokens"),
        _n(s.c.status.in_(UNKNOWN_STATUSES)).label("unknown_attempts"),
        _sum(case((s.c.status.in_(UNKNOWN_STATUSES), s.c.cost_nano_usd))).label("unknown_cost_nano_usd"),
        _sum(s.c.output_at_risk_nano_usd).label("output_at_risk_nano_usd"),
    ]
    for st in STAGES:
        on = s.c.stage == st
        out += [_n(on).label(f"{st}_rows"),
                _sum(case((on, s.c.input_tokens))).label(f"{st}_input_tokens"),
                _sum(case((on, s.c.output_tokens))).label(f"{st}_output_tokens"),
                _sum(case((on, s.c.cost_nano_usd))).label(f"{st}_cost_nano_usd"),
                _sum(case((on, s.c.shadow_cost_nano_usd))).label(f"{st}_shadow_nano_usd"),
                _n(and_(on, unpriced)).label(f"{st}_unpriced_rows")]
        if st in MODEL_STAGES:
            out.append(func.max(case((on, s.c.model))).label(f"{st}_model"))
            out.append(_n(and_(on, s.c.status != "skipped")).label(f"{st}_called_rows"))
    return out


_NULLABLE_AGG = {"context_tokens", "context_budget_tokens", *(f"{st}_model" for st in MODEL_STAGES)}
SIDE = case((and_(queries.c.origin == "live", queries.c.shadow_of.is_(None)), literal(LIVE)),
            (and_(queries.c.origin == "shadow", queries.c.shadow_of.is_not(None)), literal(SHADOW)),
            else_=literal(""))


def totals_select(ids_in=None):
    """query_totals rows computed from the ledger rows: of the queries `ids_in(column)` selects, or of every
    query (None)."""
    s = stage_calls.alias("s")
    agg = select(s.c.query_id, *_stage_aggregates(s)).group_by(s.c.query_id)
    known_q, known_s = select(queries.c.query_id), select(stage_calls.c.query_id)
    if ids_in is not None:
        agg = agg.where(ids_in(s.c.query_id))
        known_q, known_s = known_q.where(ids_in(queries.c.query_id)), known_s.where(ids_in(stage_calls.c.query_id))
    a = agg.subquery("a")
    k = union(known_q, known_s).subquery("k")
    q = queries
    cols = [
        k.c.query_id, q.c.kind, q.c.started_at, func.coalesce(func.substr(q.c.started_at, 1, 10), "").label("day"),
        q.c.variant, q.c.experiment, SIDE.label("side"), q.c.user_id, q.c.api_key_id, q.c.mode, q.c.status,
        q.c.origin, func.coalesce(q.c.sticky, 0).label("sticky"), q.c.latency_ms,
        func.coalesce(q.c.cache_hit, 0).label("cache_hit"),
        case((q.c.cache_hit == 1, func.coalesce(q.c.saved_cost_nano_usd, 0)), else_=0).label("saved_cost_nano_usd"),
        case((and_(q.c.cache_hit == 1, q.c.saved_cost_nano_usd.is_(None)), 1), else_=0).label("saved_unpriced"),
        case((func.coalesce(a.c.null_cost_rows, 0) > 0, None), else_=func.coalesce(a.c.priced_cost_nano_usd, 0))
        .label("cost_nano_usd"),
        case((func.coalesce(a.c.unpriced_rows, 0) > 0, None), else_=func.coalesce(a.c.shadow_sum_nano_usd, 0))
        .label("shadow_cost_nano_usd"),
    ]
    for c in a.c:
        if c.name != "query_id":
            cols.append(c if c.name in _NULLABLE_AGG else func.coalesce(c, 0).label(c.name))
    qa, fa = _quality_aggregates(ids_in)
    for sub in (qa, fa):
        cols += [func.coalesce(c, 0).label(c.name) for c in sub.c if c.name != "query_id"]
    # `WHERE true`: SQLite's parser needs a WHERE before an upsert's ON CONFLICT in INSERT ... SELECT
    return (select(*cols).select_from(k.outerjoin(q, q.c.query_id == k.c.query_id)
                                      .outerjoin(a, a.c.query_id == k.c.query_id)
                                      .outerjoin(qa, qa.c.query_id == k.c.query_id)
                                      .outerjoin(fa, fa.c.query_id == k.c.query_id)).where(true()))


def _quality_aggregates(ids_in=None):
    """Per query, its answer's quality as the totals keep it (m022; schema.QUALITY_INT_SUMS and
    QUALITY_FLOAT_SUMS): how many of each signal, their sum and sum of squares, from its quality rows
    (groundedness, invalid citations, the claims not supported (its `claims` row counts them) and a refusal
    flag measured locally; the judge's score and faithfulness) and its users' feedback. A signal not
    recorded counts 0 answers, never a 0 value."""
    q = query_quality.alias("qq")
    v = q.c.value

    def signal(source: str, metric: str):
        return and_(q.c.source == source, q.c.metric == metric, v.is_not(None))

    def total(cond, expr):
        return func.coalesce(func.sum(case((cond, expr))), 0.0)
    grounded, cites, claims, refusal = (signal("local", m) for m in ("groundedness", "invalid_citations", "claims",
                                                                      "refusal"))
    judged, faithful = signal("judge", "judge_score"), signal("judge", "faithfulness")
    qa = select(q.c.query_id,
                _n(grounded).label("grounded_n"), total(grounded, v).label("grounded_sum"),
                total(grounded, v * v).label("grounded_sq"),
                _n(cites).label("cites_n"), _n(and_(cites, v > 0)).label("cites_bad"),
                _n(claims).label("claims_n"), _n(and_(claims, v > 0)).label("claims_bad"),
                _n(refusal).label("refusal_n"), _n(and_(refusal, v > 0)).label("refusal_yes"),
                _n(judged).label("judge_n"), total(judged, v).label("judge_sum"), total(judged, v * v).label("judge_sq"),
                _n(faithful).label("faith_n"), total(faithful, v).label("faith_sum"),
                total(faithful, v * v).label("faith_sq")).group_by(q.c.query_id)
    f = query_feedback.alias("ff")
    fa = select(f.c.query_id, func.count().label("feedback_n"), _sum(f.c.score).label("feedback_sum"),
                _sum(f.c.score * f.c.score).label("feedback_sq"), _n(f.c.score == 1).label("feedback_up"),
                _n(f.c.score == -1).label("feedback_down")).group_by(f.c.query_id)
    if ids_in is not None:
        qa, fa = qa.where(ids_in(q.c.query_id)), fa.where(ids_in(f.c.query_id))
    return qa.subquery("qa"), fa.subquery("fa")


def stage_totals_select(ids_in):
    """query_stage_totals rows computed from the ledger rows of the queries `ids_in(column)` selects: one per
    query and stage, whatever stages its rows name (the stage's model: the greatest name when its rows name
    several, as query_totals' per-stage model columns)."""
    s = stage_calls.alias("s")
    return (select(s.c.query_id, s.c.stage, func.max(s.c.model).label("model"), func.count().label("rows"),
                   _sum(s.c.input_tokens).label("input_tokens"), _sum(s.c.output_tokens).label("output_tokens"),
                   _sum(s.c.cost_nano_usd).label("cost_nano_usd"),
                   _sum(s.c.shadow_cost_nano_usd).label("shadow_nano_usd"),
                   _n(s.c.price_source == "unpriced").label("unpriced_rows"),
                   _n(s.c.cost_nano_usd.is_(None)).label("null_cost_rows"),
                   _n(s.c.status != "skipped").label("called_rows"))
            .where(ids_in(s.c.query_id)).group_by(s.c.query_id, s.c.stage))


STAGE_COLUMNS = ("query_id", "stage", "model", "rows", "input_tokens", "output_tokens", "cost_nano_usd",
                 "shadow_nano_usd", "unpriced_rows", "null_cost_rows", "called_rows")


def _insert(db: Connection, table):
    return (postgresql.insert if db.dialect.name == "postgresql" else sqlite.insert)(table)


# -- folding queries into the totals ---------------------------------------------------------------------
def _chunks(ids: list[str]) -> Iterable[list[str]]:
    for i in range(0, len(ids), CHUNK):
        yield ids[i:i + CHUNK]


def _lock(db: Connection, ids: list[str]) -> None:
    """PostgreSQL: one advisory lock per query id, taken in one sorted order (no deadlock between writers
    folding overlapping queries), held to the end of the transaction."""
    if db.dialect.name == "postgresql" and ids:
        db.execute(text("SELECT pg_advisory_xact_lock(:cls, h) FROM (SELECT DISTINCT hashtext(x) AS h "
                        "FROM unnest(CAST(:ids AS text[])) AS t(x)) k ORDER BY h"), {"cls": FOLD_LOCK_CLASS, "ids": ids})


def ids_in(dialect: str):
    """`column IN (the ids of one fold)` with the ids as ONE bound parameter, `ids` (its value: `ids_value`),
    unnested into a set: the statement text is the same for every batch (an expanding IN list, 200 ids
    in each of ~20 places, had SQLAlchemy re-render and re-bind a 70k-character statement per batch),
    and PostgreSQL joins the set (hash or index) instead of comparing each row with every id
    (`= ANY(array)` over a not yet analyzed ledger: 150 ms per batch)."""
    if dialect == "postgresql":
        each = select(func.unnest(cast(bindparam("ids", "{}", type_=Text), postgresql.ARRAY(Text))))
    else:
        each = select(literal_column("value")).select_from(func.json_each(bindparam("ids", "[]", type_=Text)))
    return lambda col: col.in_(each)


def ids_value(dialect: str, ids: list[str]) -> Any:
    return ids if dialect == "postgresql" else json.dumps(ids)


@lru_cache(maxsize=4)
def _statements(dialect: str) -> dict[str, Any]:
    """The fold's statements, built once per engine kind (SQLAlchemy then reuses their compiled form)."""
    in_ids = ids_in(dialect)
    insert_ = postgresql.insert if dialect == "postgresql" else sqlite.insert
    sel = totals_select(in_ids)
    cols = [c.name for c in sel.selected_columns]
    upsert = insert_(query_totals).from_select(cols, sel)
    upsert = upsert.on_conflict_do_update(index_elements=["query_id"],
                                          set_={c: upsert.excluded[c] for c in cols if c != "query_id"})
    t = query_totals
    # the batch's totals rows looked up once by primary key; inlined into each of the shares' ~13 branches
    # (or filtered on `kind` here), SQLite walked the `kind` index, every query of the ledger, instead
    mine_all = select(t).where(in_ids(t.c.query_id)).cte("t_ids").prefix_with("MATERIALIZED")
    # queries, and judge runs (evaluation spend, rolled up apart from the answers' figures)
    mine = select(mine_all).where(mine_all.c.kind.in_(("query", "judge"))).subquery("t")
    known = union(select(queries.c.query_id).where(queries.c.query_id == t.c.query_id),
                  select(stage_calls.c.query_id).where(stage_calls.c.query_id == t.c.query_id))

    def rollup_by(sign: int):
        # `WHERE true`: SQLite's parser needs a WHERE before an upsert's ON CONFLICT in INSERT ... SELECT
        ins = insert_(report_rollup).from_select([*ROLLUP_KEYS, *ROLLUP_SUMS], shares_select(mine, sign).where(true()))
        return ins.on_conflict_do_update(index_elements=list(ROLLUP_KEYS),
                                         set_={c: report_rollup.c[c] + ins.excluded[c] for c in ROLLUP_SUMS})
    return {
        "unroll_old": rollup_by(-1),
        "upsert_totals": upsert,
        "delete_gone": delete(t).where(in_ids(t.c.query_id), ~known.exists()),  # every row of these was deleted
        # the per-stage sums after the old shares left the rollups and before the new ones join them
        "clear_stages": delete(query_stage_totals).where(in_ids(query_stage_totals.c.query_id)),
        "fill_stages": insert_(query_stage_totals).from_select(list(STAGE_COLUMNS), stage_totals_select(in_ids)),
        "roll_new": rollup_by(+1),
        "undirty": delete(rollup_dirty).where(in_ids(rollup_dirty.c.query_id)),  # a batch's own marks
    }


def fold(db: Connection, query_ids: Iterable[str]) -> int:
    """Recompute these queries' totals and their share of the rollups, inside the caller's transaction:
    the rollups lose the old totals' shares and gain the new ones, set-based in the engine."""
    ids = sorted({q for q in query_ids if isinstance(q, str)})
    if not ids:
        return 0
    _lock(db, ids)
    for chunk in _chunks(ids):
        _run_fold(db, chunk)
    return len(ids)


_DRIVER_DIALECTS = {"sqlite": sqlite.pysqlite.dialect, "postgresql": postgresql.psycopg.dialect}  # type: ignore[attr-defined]
FOLD_STEPS = ("unroll_old", "upsert_totals", "delete_gone", "clear_stages", "fill_stages", "roll_new")


@lru_cache(maxsize=4)
def _driver_statements(dialect: str, steps: tuple[str, ...] = FOLD_STEPS) -> list[tuple[str, Any]]:
    """The fold's statements as the driver's SQL, compiled once, and how to bind a batch's ids: executed
    through SQLAlchemy, each batch paid for a cache key made by walking every statement's tree (~1 ms a
    statement, a tenth of the writer's time on SQLite). SQLAlchemy still writes each dialect."""
    out: list[tuple[str, Any]] = []
    for step in steps:
        compiled = _statements(dialect)[step].compile(dialect=_DRIVER_DIALECTS[dialect](),
                                                      compile_kwargs={"render_postcompile": True})
        fixed = compiled.construct_params()  # the statement's own constants ('live', 0, ...)
        if dialect == "postgresql":
            out.append((str(compiled), lambda ids, fixed=fixed: {**fixed, "ids": ids}))
        else:
            order = list(compiled.positiontup or ())
            out.append((str(compiled), lambda ids, fixed=fixed, order=order:  # type: ignore[misc]
                        tuple(ids if k == "ids" else fixed[k] for k in order)))
    return out


def _run_fold(db: Connection, ids: list[str]) -> None:
    _run(db, FOLD_STEPS, ids)


def prepare(db: Connection) -> None:
    """Compile the fold's statements now (a writer's start): ~0.2 s of CPU the first batch would
    otherwise pay. They run on no query at all."""
    _run_fold(db, [])
    _run(db, ("undirty",), [])


def _run(db: Connection, steps: tuple[str, ...], ids: list[str]) -> None:
    value = ids_value(db.dialect.name, ids)
    for sql, bind in _driver_statements(db.dialect.name, steps):
        db.exec_driver_sql(sql, bind(value))


def take_dirty(db: Connection, ids: Iterable[str] = (), backlog: int = 0) -> list[str]:
    """Claim dirty marks: those of `ids` (a batch's own queries) and up to `backlog` others; the claimed
    marks are deleted in the caller's transaction, so a rollback leaves them for the next try."""
    claimed: list[str] = []
    mine = sorted(set(ids))
    for chunk in _chunks(mine):  # folded whether marked or not: no need to read back which were
        _run(db, ("undirty",), chunk)
    if backlog > 0:
        some = select(rollup_dirty.c.query_id).order_by(rollup_dirty.c.query_id).limit(backlog).scalar_subquery()
        claimed += [r[0] for r in db.execute(delete(rollup_dirty).where(rollup_dirty.c.query_id.in_(some))
                                             .returning(rollup_dirty.c.query_id))]
    return sorted(set(claimed) | set(mine))


def fold_dirty(db: Connection, ids: Iterable[str] = (), backlog: int = 0, *, guarded: bool = True) -> int:
    """Fold a batch's queries (and a slice of the backlog) inside the caller's transaction. A fault here
    must not cost the batch its rows: `guarded`, a non-transient error rolls the fold back alone (a
    savepoint), logs, marks the totals stale; transient errors propagate so the batch is retried whole.
    Unguarded (the writer's first try: SQLite journals every page a savepoint touches), every error
    propagates and the writer writes the batch again guarded."""
    from tracing.ledger.engine import is_transient, redacted_error

    if not guarded:
        return fold(db, take_dirty(db, ids, backlog))
    sp = db.begin_nested()
    try:
        n = fold(db, take_dirty(db, ids, backlog))
    except Exception as e:
        if is_transient(e):
            raise
        sp.rollback()
        log.exception("report totals not refreshed; rows kept")
        set_state(db, "stale", redacted_error(e))
        return 0
    sp.commit()
    return n


def dirty_count(db: Connection) -> int:
    return int(db.execute(select(func.count()).select_from(rollup_dirty)).scalar() or 0)


def set_state(db: Connection, name: str, value: str | None) -> None:
    if value is None:
        db.execute(delete(ledger_state).where(ledger_state.c.name == name))
        return
    ins = _insert(db, ledger_state).values(name=name, value=value)
    db.execute(ins.on_conflict_do_update(index_elements=["name"], set_={"value": ins.excluded.value}))


def get_state(db: Connection, name: str) -> str | None:
    return db.execute(select(ledger_state.c.value).where(ledger_state.c.name == name)).scalar()


def stale(db: Connection) -> str | None:
    """Why the totals may be behind the rows (a failed fold), or None."""
    return get_state(db, "stale")


# -- refolding everything, a batch at a time ------------------------------------------------------------
REFOLD = "refold:"  # ledger_state name prefix: the last query id folded from that table


_REFOLDABLE = {"query_totals": query_totals, "queries": queries, "stage_calls": stage_calls}


def start_refold(db: Connection, tables: Iterable[str]) -> None:
    """Fold every query id found in these tables again, a batch per step (`refold_step`), in key order.
    An empty table needs none (a fresh ledger starts with nothing to catch up)."""
    for t in tables:
        if db.execute(select(_REFOLDABLE[t].c.query_id).limit(1)).first() is not None:
            set_state(db, REFOLD + t, "")


def refold_pending(db: Connection) -> bool:
    return db.execute(select(ledger_state.c.name).where(ledger_state.c.name.like(REFOLD + "%")).limit(1)).first() is not None


def refold_step(db: Connection, n: int) -> int:
    """Fold the next `n` query ids of the first table with a refold in progress; 0 when none is."""
    row = db.execute(select(ledger_state.c.name, ledger_state.c.value).where(ledger_state.c.name.like(REFOLD + "%"))
                     .order_by(ledger_state.c.name).limit(1)).first()
    if row is None:
        return 0
    table = _REFOLDABLE[row[0][len(REFOLD):]]
    sel = select(table.c.query_id).where(table.c.query_id > row[1])
    if table is queries and get_state(db, REFOLD + "stage_calls") is not None:
        # the stage_calls pass folds every query that has stage rows: this one only needs the rest (cache
        # hits, queries whose rows never came); folding each query twice doubled a rebuild at 1M
        sel = sel.where(~select(stage_calls.c.query_id).where(stage_calls.c.query_id == queries.c.query_id).exists())
    ids = [r[0] for r in db.execute(sel.distinct().order_by(table.c.query_id).limit(n))]
    fold(db, ids)
    set_state(db, row[0], ids[-1] if len(ids) == n else None)
    return max(len(ids), 1)  # a finished table still counts as a step done


def rebuild(engine, batch: int = 2000) -> int:
    """Recompute every total from the rows, a batch of queries per transaction (the ledger stays
    writable meanwhile): start again from nothing and refold every query id of the rows."""
    with engine.begin() as db:
        db.execute(delete(report_rollup))
        db.execute(delete(query_totals))
        db.execute(delete(query_stage_totals))
        db.execute(delete(rollup_dirty))
        set_state(db, "stale", None)
        for name in [r[0] for r in db.execute(select(ledger_state.c.name).where(ledger_state.c.name.like(REFOLD + "%")))]:
            set_state(db, name, None)
        start_refold(db, ("stage_calls", "queries"))
    done = 0
    while True:
        with engine.begin() as db:
            n = refold_step(db, batch)
        if n == 0:
            return done
        done += n
