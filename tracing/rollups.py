"""Report totals kept up to date as the ledger is written, so no report reads every row (#11).

Two tables, created and back-filled by migration m007_report_rollups:

- `query_totals`: one row per query id seen in `queries` or `stage_calls` (what the `query_costs`
  view computes with a GROUP BY over every stage row), plus per-stage sums and the query's user,
  API key, day and experiment side. Indexed for what reports sort and filter by; percentiles are
  `ORDER BY x LIMIT 2 OFFSET k` over those indexes.
- `report_rollup`: sums per (dim, value, day, variant, experiment, side) for dims `all` (the query
  level), `user`, `key`, `stage`, `model` and `budget`, over `kind = 'query'` rows only. A summary
  or `--by` report adds up a few thousand of these rows instead of millions of stage rows. The
  sums of squares (DOUBLE PRECISION: REAL is 4 bytes on PostgreSQL) give the Welch intervals of `rag experiment compare`.

`refresh(conn, query_ids)` recomputes the totals of the given queries from their rows, inside the
caller's transaction: it subtracts their old contribution from `report_rollup`, upserts
`query_totals`, and adds the new contribution. It is idempotent, so it is right under the
`started` -> final upsert of LLM attempts and under spill replays. The ledger writer calls it after
every batch; anything that writes ledger rows another way must call it too (or `rebuild`).

The tables hold nothing that cannot be recomputed from the rows, so changing their columns is a new
migration that drops query_totals, report_rollup and rollup_state and calls `create()` + `rebuild()`
(m007 calls the current `create()`, so new and upgraded ledgers end up with the same tables).

SQL here runs on SQLite and PostgreSQL: `?` placeholders, no SQLite-only functions, integer money,
ON CONFLICT upserts with non-NULL keys ('' stands for "none" in keys).
"""
from __future__ import annotations

import logging
from collections.abc import Iterable
from decimal import Decimal

log = logging.getLogger(__name__)

STAGES = ("embed_query", "retrieve", "rerank", "generate")
MODEL_STAGES = ("embed_query", "rerank", "generate")  # retrieve uses no priced model
SIDE_SQL = ("CASE WHEN q.origin = 'live' AND q.shadow_of IS NULL THEN 'live' "
            "WHEN q.origin = 'shadow' AND q.shadow_of IS NOT NULL THEN 'shadow' ELSE '' END")
_CHUNK = 250  # ids per statement (bound up to 8 times: well under SQLite's and PostgreSQL's variable limits)
_SIZES = (4, 16, 64, _CHUNK)

# per-query columns computed from stage rows: (name, SQL type, aggregate over stage_calls s)
_UNPRICED = "CASE WHEN s.price_source = 'unpriced' THEN 1 ELSE 0 END"
_STAGE_AGG = [
    ("stage_rows", "INTEGER NOT NULL DEFAULT 0", "COUNT(*)"),
    ("input_tokens", "INTEGER NOT NULL DEFAULT 0", "COALESCE(SUM(s.input_tokens), 0)"),
    ("output_tokens", "INTEGER NOT NULL DEFAULT 0", "COALESCE(SUM(s.output_tokens), 0)"),
    ("null_cost_rows", "INTEGER NOT NULL DEFAULT 0", "SUM(CASE WHEN s.cost_nano_usd IS NULL THEN 1 ELSE 0 END)"),
    ("priced_cost_nano_usd", "INTEGER NOT NULL DEFAULT 0", "COALESCE(SUM(s.cost_nano_usd), 0)"),
    ("shadow_sum_nano_usd", "INTEGER NOT NULL DEFAULT 0", "COALESCE(SUM(s.shadow_cost_nano_usd), 0)"),
    ("unpriced_rows", "INTEGER NOT NULL DEFAULT 0", f"SUM({_UNPRICED})"),
    ("waste_nano_usd", "INTEGER NOT NULL DEFAULT 0",
     "COALESCE(SUM(CASE WHEN s.status IN ('retry', 'timeout', 'error') THEN s.cost_nano_usd END), 0)"),
    ("retries", "INTEGER NOT NULL DEFAULT 0", "SUM(CASE WHEN s.status = 'retry' THEN 1 ELSE 0 END)"),
    ("timeouts", "INTEGER NOT NULL DEFAULT 0", "SUM(CASE WHEN s.status = 'timeout' THEN 1 ELSE 0 END)"),
    ("estimated_rows", "INTEGER NOT NULL DEFAULT 0",
     "SUM(CASE WHEN s.usage_source LIKE 'estimated:%' THEN 1 ELSE 0 END)"),
    ("output_at_risk_tokens", "INTEGER NOT NULL DEFAULT 0", "COALESCE(SUM(s.output_at_risk_tokens), 0)"),
    ("cache_hits", "INTEGER NOT NULL DEFAULT 0",
     "COALESCE(SUM(CASE WHEN s.stage = 'embed_query' THEN s.cache_hits END), 0)"),
    ("cache_misses", "INTEGER NOT NULL DEFAULT 0",
     "COALESCE(SUM(CASE WHEN s.stage = 'embed_query' THEN s.cache_misses END), 0)"),
    ("context_tokens", "INTEGER", "MAX(CASE WHEN s.stage = 'generate' THEN s.context_tokens END)"),
    ("context_budget_tokens", "INTEGER", "MAX(CASE WHEN s.stage = 'generate' AND s.context_tokens IS NOT NULL "
                                         "THEN s.context_budget_tokens END)"),
]
for _st in STAGES:
    _on = f"s.stage = '{_st}'"
    _STAGE_AGG += [
        (f"{_st}_rows", "INTEGER NOT NULL DEFAULT 0", f"SUM(CASE WHEN {_on} THEN 1 ELSE 0 END)"),
        (f"{_st}_input_tokens", "INTEGER NOT NULL DEFAULT 0", f"COALESCE(SUM(CASE WHEN {_on} THEN s.input_tokens END), 0)"),
        (f"{_st}_output_tokens", "INTEGER NOT NULL DEFAULT 0", f"COALESCE(SUM(CASE WHEN {_on} THEN s.output_tokens END), 0)"),
        (f"{_st}_cost_nano_usd", "INTEGER NOT NULL DEFAULT 0", f"COALESCE(SUM(CASE WHEN {_on} THEN s.cost_nano_usd END), 0)"),
        (f"{_st}_shadow_nano_usd", "INTEGER NOT NULL DEFAULT 0",
         f"COALESCE(SUM(CASE WHEN {_on} THEN s.shadow_cost_nano_usd END), 0)"),
        (f"{_st}_unpriced_rows", "INTEGER NOT NULL DEFAULT 0", f"SUM(CASE WHEN {_on} THEN {_UNPRICED} ELSE 0 END)"),
    ]
    if _st in MODEL_STAGES:
        _STAGE_AGG.append((f"{_st}_model", "TEXT", f"MAX(CASE WHEN {_on} THEN s.model END)"))

# per-query columns from the query row (q) and the stage aggregate (a)
_QUERY_COLS = [
    ("kind", "TEXT", "q.kind"),                      # NULL: stage rows without a query row (orphans)
    ("started_at", "TEXT", "q.started_at"),
    ("day", "TEXT NOT NULL DEFAULT ''", "COALESCE(substr(q.started_at, 1, 10), '')"),
    ("variant", "TEXT", "q.variant"),
    ("experiment", "TEXT", "q.experiment"),
    ("side", "TEXT NOT NULL DEFAULT ''", SIDE_SQL),  # live / shadow: what experiment compare reads
    ("user_id", "TEXT", "q.user_id"),
    ("api_key_id", "TEXT", "q.api_key_id"),
    ("mode", "TEXT", "q.mode"),
    ("status", "TEXT", "q.status"),
    ("origin", "TEXT", "q.origin"),
    ("sticky", "INTEGER NOT NULL DEFAULT 0", "COALESCE(q.sticky, 0)"),
    ("latency_ms", "REAL", "q.latency_ms"),
    # as the query_costs view: NULL when any stage row's cost is unknown, never $0
    ("cost_nano_usd", "INTEGER", "CASE WHEN COALESCE(a.null_cost_rows, 0) > 0 THEN NULL "
                                 "ELSE COALESCE(a.priced_cost_nano_usd, 0) END"),
    ("shadow_cost_nano_usd", "INTEGER", "CASE WHEN COALESCE(a.unpriced_rows, 0) > 0 THEN NULL "
                                        "ELSE COALESCE(a.shadow_sum_nano_usd, 0) END"),
]
QUERY_TOTALS_COLUMNS = [c for c, _, _ in _QUERY_COLS] + [c for c, _, _ in _STAGE_AGG]

# report_rollup sums: (name, SQL type, contribution of the query-level dims from query_totals t)
_Q = "CASE WHEN t.{} THEN 1 ELSE 0 END"
_ROLLUP_SUMS = [
    ("queries", "INTEGER", "COUNT(*)"),
    ("priced_queries", "INTEGER", f"SUM({_Q.format('cost_nano_usd IS NOT NULL')})"),
    ("cost_nano_usd", "INTEGER", "COALESCE(SUM(t.cost_nano_usd), 0)"),     # fully priced queries only
    ("priced_cost_nano_usd", "INTEGER", "SUM(t.priced_cost_nano_usd)"),    # every known cost: the total
    ("shadow_queries", "INTEGER", f"SUM({_Q.format('shadow_cost_nano_usd IS NOT NULL')})"),
    ("shadow_cost_nano_usd", "INTEGER", "COALESCE(SUM(t.shadow_cost_nano_usd), 0)"),
    ("stage_rows", "INTEGER", "SUM(t.stage_rows)"),
    ("input_tokens", "INTEGER", "SUM(t.input_tokens)"),
    ("output_tokens", "INTEGER", "SUM(t.output_tokens)"),
    ("unpriced_rows", "INTEGER", "SUM(t.unpriced_rows)"),
    ("estimated_rows", "INTEGER", "SUM(t.estimated_rows)"),
    ("retries", "INTEGER", "SUM(t.retries)"),
    ("timeouts", "INTEGER", "SUM(t.timeouts)"),
    ("waste_nano_usd", "INTEGER", "SUM(t.waste_nano_usd)"),
    ("output_at_risk_tokens", "INTEGER", "SUM(t.output_at_risk_tokens)"),
    ("cache_hits", "INTEGER", "SUM(t.cache_hits)"),
    ("cache_misses", "INTEGER", "SUM(t.cache_misses)"),
    ("context_queries", "INTEGER", f"SUM({_Q.format('context_tokens IS NOT NULL')})"),
    ("context_tokens", "INTEGER", "COALESCE(SUM(t.context_tokens), 0)"),
    ("error_queries", "INTEGER", "SUM(CASE WHEN t.status = 'error' THEN 1 ELSE 0 END)"),
    ("timeout_queries", "INTEGER", f"SUM({_Q.format('timeouts > 0')})"),
    ("retry_queries", "INTEGER", f"SUM({_Q.format('retries > 0')})"),
    ("sticky_queries", "INTEGER", f"SUM({_Q.format('sticky <> 0')})"),
    ("latency_ms", "DOUBLE PRECISION", "COALESCE(SUM(t.latency_ms), 0)"),
    # sums of squares for Welch intervals (floats: squares of nano-dollars overflow 64-bit integers)
    ("cost_sq", "DOUBLE PRECISION", "COALESCE(SUM(CAST(t.cost_nano_usd AS DOUBLE PRECISION) * t.cost_nano_usd), 0)"),
    ("shadow_sq", "DOUBLE PRECISION", "COALESCE(SUM(CAST(t.shadow_cost_nano_usd AS DOUBLE PRECISION) * t.shadow_cost_nano_usd), 0)"),
    ("latency_sq", "DOUBLE PRECISION", "COALESCE(SUM(COALESCE(t.latency_ms, 0) * COALESCE(t.latency_ms, 0)), 0)"),
]
ROLLUP_SUMS = [c for c, _, _ in _ROLLUP_SUMS]
ROLLUP_KEYS = ("dim", "value", "day", "variant", "experiment", "side")
DIMS = ("all", "user", "key", "stage", "model", "budget")

# query_totals indexes: listing (newest first, keyset paging), percentiles, per-arm percentiles
INDEXES = {
    "query_totals_started": "(kind, started_at, query_id)",
    "query_totals_variant_started": "(kind, variant, started_at, query_id)",
    "query_totals_cost": "(kind, cost_nano_usd)",
    "query_totals_shadow": "(kind, shadow_cost_nano_usd)",
    "query_totals_variant_cost": "(kind, variant, cost_nano_usd)",
    "query_totals_variant_shadow": "(kind, variant, shadow_cost_nano_usd)",
    "query_totals_arm_cost": "(kind, experiment, variant, side, cost_nano_usd) WHERE experiment IS NOT NULL",
    "query_totals_arm_shadow": "(kind, experiment, variant, side, shadow_cost_nano_usd) WHERE experiment IS NOT NULL",
    "query_totals_arm_latency": "(kind, experiment, variant, side, latency_ms) WHERE experiment IS NOT NULL",
}


def create(db) -> None:
    """DDL (run by migration m007_report_rollups)."""
    cols = ",\n".join(f"{c} {t}" for c, t, _ in _QUERY_COLS + _STAGE_AGG)
    db.execute(f"CREATE TABLE query_totals (query_id TEXT PRIMARY KEY,\n{cols})")
    for name, spec in INDEXES.items():
        on, _, where = spec.partition(" WHERE ")
        db.execute(f"CREATE INDEX {name} ON query_totals {on}" + (f" WHERE {where}" if where else ""))
    sums = ",\n".join(f"{c} {t} NOT NULL DEFAULT 0" for c, t, _ in _ROLLUP_SUMS)
    db.execute(f"CREATE TABLE report_rollup (dim TEXT NOT NULL, value TEXT NOT NULL, day TEXT NOT NULL, "
               f"variant TEXT NOT NULL, experiment TEXT NOT NULL, side TEXT NOT NULL,\n{sums},\n"
               f"PRIMARY KEY ({', '.join(ROLLUP_KEYS)}))")
    db.execute("CREATE TABLE rollup_state (name TEXT PRIMARY KEY, value TEXT)")


def number(v):
    """A SUM as Python sees it on either backend: PostgreSQL's SUM of integers is numeric (Decimal)."""
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    return 0 if v is None else v


def sums(row, offset: int = 0) -> dict:
    """ROLLUP_SUMS of a row whose columns from `offset` on are those sums, NULL as 0."""
    return {c: number(row[offset + i]) for i, c in enumerate(ROLLUP_SUMS)}


def _marks(n: int) -> str:
    return ",".join("?" * n)


def _upsert_totals_sql(n: int | None) -> str:
    """Upsert of query_totals for `n` bound ids (each bound three times), or for every query (None)."""
    ins = ", ".join(["query_id"] + QUERY_TOTALS_COLUMNS)
    agg = ", ".join(f"{expr} AS {c}" for c, _, expr in _STAGE_AGG)
    qsel = ", ".join(expr for _, _, expr in _QUERY_COLS)
    asel = ", ".join(f"COALESCE(a.{c}, 0)" if "NOT NULL" in t else f"a.{c}" for c, t, _ in _STAGE_AGG)
    upd = ", ".join(f"{c} = excluded.{c}" for c in QUERY_TOTALS_COLUMNS)
    only = "" if n is None else f" WHERE query_id IN ({_marks(n)})"
    s_only = "" if n is None else f" WHERE s.query_id IN ({_marks(n)})"
    return (f"INSERT INTO query_totals ({ins}) "
            f"SELECT k.query_id, {qsel}, {asel} FROM "
            f"(SELECT query_id FROM queries{only} UNION SELECT query_id FROM stage_calls{only}) k "
            f"LEFT JOIN queries q ON q.query_id = k.query_id "
            f"LEFT JOIN (SELECT s.query_id, {agg} FROM stage_calls s{s_only} "
            f"GROUP BY s.query_id) a ON a.query_id = k.query_id WHERE 1 = 1 "
            f"ON CONFLICT (query_id) DO UPDATE SET {upd}")


def _contributions(sign: int) -> list[tuple[str, int]]:
    """(SELECT ... FROM query_totals t WHERE t.query_id IN (<ids>) ..., how many times ids are bound)
    per dim; each SELECT yields ROLLUP_KEYS + ROLLUP_SUMS, multiplied by `sign`."""
    sums = ", ".join(f"{sign} * {expr}" for _, _, expr in _ROLLUP_SUMS)
    keys = "t.day, COALESCE(t.variant, ''), COALESCE(t.experiment, ''), t.side"
    # COALESCE keeps the planner on the primary key for the ids (an index on kind would scan every query)
    base = "FROM query_totals t WHERE COALESCE(t.kind, '') = 'query'{ids}"
    out = [f"SELECT 'all', '', {keys}, {sums} {base} GROUP BY {keys}",
           f"SELECT 'user', COALESCE(t.user_id, ''), {keys}, {sums} {base} GROUP BY COALESCE(t.user_id, ''), {keys}",
           f"SELECT 'key', COALESCE(t.api_key_id, ''), {keys}, {sums} {base} "
           f"GROUP BY COALESCE(t.api_key_id, ''), {keys}",
           f"SELECT 'budget', CAST(t.context_budget_tokens AS TEXT), {keys}, {sums} {base} "
           f"AND t.context_budget_tokens IS NOT NULL GROUP BY t.context_budget_tokens, {keys}"]
    # stage and model dims: stage-row sums; `queries` counts queries that had such rows
    per_stage = []
    for st in STAGES:
        model = f"t.{st}_model" if st in MODEL_STAGES else "NULL"
        per_stage.append(
            f"SELECT t.query_id, t.day, COALESCE(t.variant, '') AS variant, COALESCE(t.experiment, '') AS experiment, t.side, '{st}' AS stage, "
            f"{model} AS model, t.{st}_rows AS n, t.{st}_input_tokens AS tin, t.{st}_output_tokens AS tout, "
            f"t.{st}_cost_nano_usd AS cost, t.{st}_shadow_nano_usd AS shadow, t.{st}_unpriced_rows AS unpriced "
            f"{base} AND t.{st}_rows > 0")
    u = " UNION ALL ".join(per_stage)
    stage_sums = {"queries": "COUNT(DISTINCT u.query_id)", "priced_cost_nano_usd": "SUM(u.cost)",
                  "cost_nano_usd": "SUM(u.cost)", "shadow_cost_nano_usd": "SUM(u.shadow)", "stage_rows": "SUM(u.n)",
                  "input_tokens": "SUM(u.tin)", "output_tokens": "SUM(u.tout)", "unpriced_rows": "SUM(u.unpriced)"}
    ssel = ", ".join(f"{sign} * {stage_sums[c]}" if c in stage_sums else "0" for c in ROLLUP_SUMS)
    ukeys = "u.day, u.variant, u.experiment, u.side"
    out.append(f"SELECT 'stage', u.stage, {ukeys}, {ssel} FROM ({u}) u WHERE 1 = 1 GROUP BY u.stage, {ukeys}")
    out.append(f"SELECT 'model', u.model, {ukeys}, {ssel} FROM ({u}) u WHERE u.model IS NOT NULL "
               f"GROUP BY u.model, {ukeys}")
    return [(sql, sql.count("{ids}")) for sql in out]


_ADD = ", ".join(f"{c} = report_rollup.{c} + excluded.{c}" for c in ROLLUP_SUMS)
_ROLLUP_INSERT = (f"INSERT INTO report_rollup ({', '.join(ROLLUP_KEYS + tuple(ROLLUP_SUMS))}) {{select}} "
                  f"ON CONFLICT ({', '.join(ROLLUP_KEYS)}) DO UPDATE SET {_ADD}")


def _apply(db, ids: list[str] | None, sign: int) -> None:
    only = "" if ids is None else f" AND t.query_id IN ({_marks(len(ids))})"
    for sql, times in _contributions(sign):
        db.execute(_ROLLUP_INSERT.format(select=sql.replace("{ids}", only)), (ids or []) * times)


def refresh(db, query_ids: Iterable[str]) -> None:
    """Recompute these queries' totals and their share of the rollups (inside the caller's transaction)."""
    ids = sorted({q for q in query_ids if isinstance(q, str)})
    for i in range(0, len(ids), _CHUNK):
        chunk = _padded(ids[i:i + _CHUNK])
        # only queries with a query row are in the rollups: most batches carry stage rows of queries in
        # flight (no query row yet), so the rollup statements usually run for a few ids or none
        rolled = _rolled_up(db, chunk)
        if rolled:
            _apply(db, _padded(rolled), -1)
        db.execute(_upsert_totals_sql(len(chunk)), chunk * 3)
        rolled = _rolled_up(db, chunk)
        if rolled:
            _apply(db, _padded(rolled), +1)


def _padded(ids: list[str]) -> list[str]:
    """The ids repeated up to a few fixed list sizes: the statement text, and so the compiled statement
    the driver caches, is then one of four per statement instead of one per batch size (IN ignores
    the repeats)."""
    size = next((b for b in _SIZES if b >= len(ids)), len(ids))
    return ids + [ids[-1]] * (size - len(ids))


def _rolled_up(db, ids: list[str]) -> list[str]:
    return [r[0] for r in db.execute(f"SELECT query_id FROM query_totals WHERE query_id IN ({_marks(len(ids))}) "
                                     "AND COALESCE(kind, '') = 'query'", ids)]


def affected(rows: Iterable[tuple[str, dict]]) -> set[str]:
    """Query ids a batch of (table, row) touches."""
    return {r["query_id"] for t, r in rows if t in ("queries", "stage_calls") and isinstance(r, dict)
            and isinstance(r.get("query_id"), str)}


def after_write(db, rows: list[tuple[str, dict]], is_transient) -> None:
    """The ledger writer's hook: refresh the batch's queries. A fault here must not cost the batch its
    rows: a non-transient error rolls the refresh back alone, logs, and marks the rollups stale
    (`rag report` then says to run `rag report --rebuild-totals`); transient errors propagate, so the
    batch is retried as a whole."""
    ids = affected(rows)
    if not ids:
        return
    db.execute("SAVEPOINT rollups")
    try:
        refresh(db, ids)
    except Exception as e:
        if is_transient(e):
            raise
        db.execute("ROLLBACK TO rollups")
        log.exception("report totals not refreshed for %d queries; rows kept", len(ids))
        db.execute("INSERT INTO rollup_state (name, value) VALUES ('stale', ?) "
                   "ON CONFLICT (name) DO UPDATE SET value = excluded.value", (f"{type(e).__name__}: {e}"[:500],))
    db.execute("RELEASE rollups")


def stale(db) -> str | None:
    """Why the rollups may be behind the rows (a failed refresh), or None."""
    row = db.execute("SELECT value FROM rollup_state WHERE name = 'stale'").fetchone()
    return row[0] if row else None


def rebuild(db) -> None:
    """Recompute every total from the rows, in set-wise statements (migration back-fill; after rows
    were written around the writer)."""
    db.execute("DELETE FROM report_rollup")
    db.execute("DELETE FROM query_totals")
    db.execute("DELETE FROM rollup_state WHERE name = 'stale'")
    db.execute(_upsert_totals_sql(None))
    _apply(db, None, +1)
