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
them), and a query's share of the rollups is a pure function of its totals (`contributions`), so the
rollups move by new share minus old share. It is idempotent, right under the `started` -> final upsert
of LLM attempts and under spill replays. The writer folds its batch's queries in the batch's own
transaction, plus a slice of any backlog (rows written around it, or a migration's back-fill), so the
backlog drains a batch at a time and never holds the ledger. On PostgreSQL concurrent writers take a
transaction-scoped advisory lock per query id (in one sorted order) before folding it.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    Connection,
    and_,
    bindparam,
    case,
    delete,
    func,
    literal,
    select,
    text,
    true,
    union,
)
from sqlalchemy.dialects import postgresql, sqlite

from tracing.ledger.schema import (
    MODEL_STAGES,
    ROLLUP_FLOAT_SUMS,
    ROLLUP_KEYS,
    ROLLUP_SUMS,
    STAGES,
    ledger_state,
    queries,
    query_totals,
    report_rollup,
    rollup_dirty,
    stage_calls,
)

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
    return out


_NULLABLE_AGG = {"context_tokens", "context_budget_tokens", *(f"{st}_model" for st in MODEL_STAGES)}
SIDE = case((and_(queries.c.origin == "live", queries.c.shadow_of.is_(None)), literal(LIVE)),
            (and_(queries.c.origin == "shadow", queries.c.shadow_of.is_not(None)), literal(SHADOW)),
            else_=literal(""))


def totals_select(ids: list[str] | None):
    """query_totals rows computed from the ledger rows: of `ids`, or of every query (None)."""
    s = stage_calls.alias("s")
    agg = select(s.c.query_id, *_stage_aggregates(s)).group_by(s.c.query_id)
    known_q, known_s = select(queries.c.query_id), select(stage_calls.c.query_id)
    if ids is not None:
        agg = agg.where(s.c.query_id.in_(ids))
        known_q, known_s = known_q.where(queries.c.query_id.in_(ids)), known_s.where(stage_calls.c.query_id.in_(ids))
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
    # `WHERE true`: SQLite's parser needs a WHERE before an upsert's ON CONFLICT in INSERT ... SELECT
    return (select(*cols).select_from(k.outerjoin(q, q.c.query_id == k.c.query_id)
                                      .outerjoin(a, a.c.query_id == k.c.query_id)).where(true()))


def _insert(db: Connection, table):
    return (postgresql.insert if db.dialect.name == "postgresql" else sqlite.insert)(table)


# -- a query's share of the rollups -------------------------------------------------------------------------
N_SUMS = len(ROLLUP_SUMS)
_AT = {name: i for i, name in enumerate(ROLLUP_SUMS)}
_PART = ("priced_cost_nano_usd", "cost_nano_usd", "shadow_cost_nano_usd", "stage_rows", "input_tokens",
         "output_tokens", "unpriced_rows")  # what a stage / model share carries besides `queries`


def query_vector(t: Mapping) -> list[float]:
    """A query's sums in ROLLUP_SUMS order (what the all, user, key and budget dims add)."""
    cost, shadow, lat, ctx = t["cost_nano_usd"], t["shadow_cost_nano_usd"], t["latency_ms"], t["context_tokens"]
    lat = lat or 0.0
    return [  # the order of schema.ROLLUP_SUMS (test_rollup_vector_follows_the_schema)
        1, int(cost is not None), cost or 0, t["priced_cost_nano_usd"], int(shadow is not None), shadow or 0,
        t["stage_rows"], t["input_tokens"], t["output_tokens"], t["unpriced_rows"], t["estimated_rows"], t["retries"],
        t["timeouts"], t["waste_nano_usd"], t["output_at_risk_tokens"], t["cache_hits"], t["cache_misses"],
        int(ctx is not None), ctx or 0, int(t["status"] == "error"), int(t["timeouts"] > 0), int(t["retries"] > 0),
        int(t["sticky"] != 0), lat,
        float(cost) * cost if cost is not None else 0.0, float(shadow) * shadow if shadow is not None else 0.0,
        float(lat) * lat, t.get("unknown_attempts", 0), t.get("unknown_cost_nano_usd", 0), t["shadow_sum_nano_usd"],
        t.get("cache_hit", 0), t.get("saved_cost_nano_usd", 0), t.get("saved_unpriced", 0)]


def query_sums(t: Mapping) -> dict[str, float]:
    return dict(zip(ROLLUP_SUMS, query_vector(t)))


_PART_AT = [_AT[n] for n in ("queries", "priced_cost_nano_usd", "cost_nano_usd", "shadow_cost_nano_usd",
                              "stage_rows", "input_tokens", "output_tokens", "unpriced_rows", "shadow_part_nano_usd")]


_STAGE_KEYS = {st: tuple(f"{st}_{c}" for c in ("cost_nano_usd", "shadow_nano_usd", "rows", "input_tokens",
                                                "output_tokens", "unpriced_rows", "model")) for st in STAGES}


def _part(t: Mapping, stages: Iterable[str]) -> list[float]:
    """The sums a stage (or a model, over the stages that used it) adds: its rows' figures, one query.
    Sparse: (queries, priced cost, cost, shadow, rows, tokens in, tokens out, unpriced, shadow) at _PART_AT."""
    v = [1, 0, 0, 0, 0, 0, 0, 0, 0]
    for st in stages:
        k_cost, k_shadow, k_rows, k_in, k_out, k_unpriced, _ = _STAGE_KEYS[st]
        cost = t[k_cost]
        v[1] += cost
        v[2] += cost
        v[3] += t[k_shadow]
        v[4] += t[k_rows]
        v[5] += t[k_in]
        v[6] += t[k_out]
        v[7] += t[k_unpriced]
    v[8] = v[3]
    return v


def dense(vec: list[float]) -> list[float]:
    """A share as a full ROLLUP_SUMS vector (stage and model shares are kept sparse)."""
    if len(vec) == N_SUMS:
        return vec
    out = [0.0] * N_SUMS
    for i, v in zip(_PART_AT, vec):
        out[i] = v
    return out


def contributions(t: Mapping | None) -> dict[tuple, list[float]]:
    """What one query adds to each rollup key, as vectors in ROLLUP_SUMS order: nothing unless it is a
    query (not an ingest run, not an orphan's rows)."""
    if t is None or t["kind"] != "query":
        return {}
    base = (t["day"], t["variant"] or "", t["experiment"] or "", t["side"])
    q = query_vector(t)
    user = t["user_id"] or ""
    out = {("all", "", *base): q, ("user", user, *base): q, ("key", t["api_key_id"] or "", *base): q,
           # per user over all days too: `--by user` then reads one row per user, not one per user and day
           ("user_total", user, "", *base[1:]): q}
    if t["context_budget_tokens"] is not None:
        out[("budget", str(t["context_budget_tokens"]), *base)] = q
    by_model: dict[str, list[str]] = defaultdict(list)
    for st, keys in _STAGE_KEYS.items():
        if not t[keys[2]]:
            continue  # no row of this stage
        out[("stage", st, *base)] = _part(t, (st,))
        model = t.get(keys[6])
        if model:
            by_model[model].append(st)
    for model, stages in by_model.items():
        out[("model", model, *base)] = _part(t, stages)
    return out


def _collect(into: dict[tuple, tuple[list, list]], shares: dict[tuple, list[float]], sign: int) -> None:
    for key, vec in shares.items():
        into.setdefault(key, ([], []))[0 if sign > 0 else 1].append(vec)


def _summed(collected: dict[tuple, tuple[list, list]]) -> dict[tuple, list[float]]:
    """Per key: the added shares minus the removed ones, summed a column at a time (sum() runs in C)."""
    out = {}
    for key, (plus, minus) in collected.items():
        width = len(plus[0]) if plus else len(minus[0])
        total = [sum(col) for col in zip(*plus)] if plus else [0] * width
        if minus:
            total = [a - sum(col) for a, col in zip(total, zip(*minus))]
        out[key] = dense(total)
    return out


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


@lru_cache(maxsize=4)
def _statements(dialect: str) -> dict[str, Any]:
    """The fold's statements, built once per engine kind with an expanding `ids` parameter, so each batch
    reuses SQLAlchemy's compiled form instead of building them anew."""
    ids = bindparam("ids", expanding=True)
    insert_ = postgresql.insert if dialect == "postgresql" else sqlite.insert
    sel = totals_select(ids)  # type: ignore[arg-type]
    cols = [c.name for c in sel.selected_columns]
    upsert = insert_(query_totals).from_select(cols, sel)
    upsert = upsert.on_conflict_do_update(index_elements=["query_id"],
                                          set_={c: upsert.excluded[c] for c in cols if c != "query_id"})
    rollup = insert_(report_rollup)
    rollup = rollup.on_conflict_do_update(index_elements=list(ROLLUP_KEYS),
                                          set_={c: report_rollup.c[c] + rollup.excluded[c] for c in ROLLUP_SUMS})
    return {
        "old_totals": select(query_totals).where(query_totals.c.query_id.in_(ids)),
        "upsert_totals": upsert.returning(*query_totals.c),
        "delete_totals": delete(query_totals).where(query_totals.c.query_id.in_(ids)),
        "rollup": rollup,
    }


def _by_query(result) -> dict[str, dict]:
    """Rows as plain dicts by query id (a dict lookup is several times cheaper than a RowMapping's)."""
    keys = list(result.keys())
    return {row[0]: dict(zip(keys, row)) for row in result}


def fold(db: Connection, query_ids: Iterable[str]) -> int:
    """Recompute these queries' totals and their share of the rollups, inside the caller's transaction."""
    ids = sorted({q for q in query_ids if isinstance(q, str)})
    if not ids:
        return 0
    _lock(db, ids)
    st = _statements(db.dialect.name)
    collected: dict[tuple, tuple[list, list]] = {}
    for chunk in _chunks(ids):
        p = {"ids": chunk}
        old_t = _by_query(db.execute(st["old_totals"], p))
        new_t = _by_query(db.execute(st["upsert_totals"], p))
        gone = [q for q in chunk if q not in new_t]  # every row of these was deleted
        if gone:
            db.execute(st["delete_totals"], {"ids": gone})
        for q in chunk:
            old, new = old_t.get(q), new_t.get(q)
            if old is not None and old["kind"] == "query":
                _collect(collected, contributions(old), -1)
            if new is not None and new["kind"] == "query":
                _collect(collected, contributions(new), +1)
    _apply(db, _summed(collected))
    return len(ids)


def _apply(db: Connection, delta: dict[tuple, list[float]]) -> None:
    params = []
    floats = {_AT[n] for n in ROLLUP_FLOAT_SUMS}
    for key in sorted(delta):  # one order for every writer: concurrent upserts of the same keys cannot deadlock
        vec = delta[key]
        if not any(vec):
            continue
        row = dict(zip(ROLLUP_KEYS, key))
        for i, name in enumerate(ROLLUP_SUMS):
            row[name] = vec[i] if i in floats else int(round(vec[i]))
        params.append(row)
    if params:
        db.execute(_statements(db.dialect.name)["rollup"], params)


def take_dirty(db: Connection, ids: Iterable[str] = (), backlog: int = 0) -> list[str]:
    """Claim dirty marks: those of `ids` (a batch's own queries) and up to `backlog` others; the claimed
    marks are deleted in the caller's transaction, so a rollback leaves them for the next try."""
    claimed: list[str] = []
    mine = sorted(set(ids))
    for chunk in _chunks(mine):
        claimed += [r[0] for r in db.execute(delete(rollup_dirty).where(rollup_dirty.c.query_id.in_(chunk))
                                             .returning(rollup_dirty.c.query_id))]
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
    ids = [r[0] for r in db.execute(select(table.c.query_id).where(table.c.query_id > row[1]).distinct()
                                    .order_by(table.c.query_id).limit(n))]
    fold(db, ids)
    set_state(db, row[0], ids[-1] if len(ids) == n else None)
    return max(len(ids), 1)  # a finished table still counts as a step done


def rebuild(engine, batch: int = 2000) -> int:
    """Recompute every total from the rows, a batch of queries per transaction (the ledger stays
    writable meanwhile): start again from nothing and refold every query id of the rows."""
    with engine.begin() as db:
        db.execute(delete(report_rollup))
        db.execute(delete(query_totals))
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
