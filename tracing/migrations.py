"""Ledger schema as a list of small migrations (after simonw/llm). Each runs once, in order, inside
ONE explicit transaction together with its record in `_migrations`: SQLite's DDL is transactional,
but Python's sqlite3 module (3.11) only opens implicit transactions before DML, so an ALTER TABLE in
`with conn:` would autocommit and a migration failing halfway would leave its first column behind.
Never edit a shipped migration: add one.

The same migrations build a PostgreSQL ledger (RAG_LEDGER_URL): tracing/db.py translates their DDL
(`INTEGER` -> `BIGINT`, `AUTOINCREMENT` -> `BIGSERIAL`, ...), a migration whose SQL cannot be written
portably picks by `dialect(db)`, and each one runs under a transaction-scoped advisory lock, so
replicas starting together apply it exactly once."""
from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime, timezone

from tracing.db import dialect, has_table

# pg_advisory_xact_lock key for "migrating the ledger" (any constant; this one spells "ragl")
PG_MIGRATION_LOCK = 0x7261676C

MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = []


def migration(fn):
    MIGRATIONS.append(fn)
    return fn


@migration
def m001_initial(db: sqlite3.Connection) -> None:
    db.execute("""
        CREATE TABLE queries (
            query_id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,               -- query | ingest
            question TEXT,
            variant TEXT,
            experiment TEXT,
            mode TEXT,                        -- llm | extractive (queries)
            status TEXT NOT NULL,             -- ok | error | timeout
            error TEXT,
            started_at TEXT NOT NULL,         -- UTC ISO-8601
            ended_at TEXT,
            latency_ms REAL
        )""")
    db.execute("""
        CREATE TABLE stage_calls (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            query_id TEXT NOT NULL,
            stage TEXT NOT NULL,              -- embed_query | retrieve | rerank | generate | embed_documents ...
            call_id TEXT,                     -- the logical call every physical attempt belongs to
            attempt INTEGER NOT NULL DEFAULT 1,
            status TEXT NOT NULL,             -- ok | error | timeout | retry | skipped
            model TEXT,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cached_tokens INTEGER NOT NULL DEFAULT 0,
            cost_nano_usd INTEGER,            -- NULL = unpriced
            shadow_cost_nano_usd INTEGER,     -- what a hosted equivalent would have billed
            price_version TEXT,
            price_source TEXT,                -- genai-prices | override | rate | unpriced
            possibly_billed INTEGER NOT NULL DEFAULT 0,  -- timeout after the request was sent
            latency_ms REAL,
            cache_hits INTEGER,
            cache_misses INTEGER,
            error TEXT,
            variant TEXT,
            experiment TEXT,
            started_at TEXT NOT NULL,
            ended_at TEXT
        )""")
    db.execute("CREATE INDEX stage_calls_query ON stage_calls(query_id)")
    db.execute("CREATE INDEX stage_calls_started ON stage_calls(started_at)")
    db.execute("CREATE INDEX queries_started ON queries(started_at)")


@migration
def m002_query_costs_view(db: sqlite3.Connection) -> None:
    # Totals per query in one place, so CLI reports and the dashboard read the same numbers.
    db.execute("""
        CREATE VIEW query_costs AS
        SELECT q.query_id, q.kind, q.question, q.variant, q.experiment, q.mode, q.status,
               q.started_at, q.latency_ms,
               COALESCE(SUM(s.input_tokens), 0) AS input_tokens,
               COALESCE(SUM(s.output_tokens), 0) AS output_tokens,
               COALESCE(SUM(s.cost_nano_usd), 0) AS cost_nano_usd,
               COALESCE(SUM(s.shadow_cost_nano_usd), 0) AS shadow_cost_nano_usd,
               SUM(CASE WHEN s.cost_nano_usd IS NULL AND s.price_source = 'unpriced' THEN 1 ELSE 0 END) AS unpriced_rows,
               COALESCE(SUM(CASE WHEN s.status IN ('retry', 'timeout', 'error') THEN s.cost_nano_usd END), 0) AS waste_nano_usd,
               SUM(CASE WHEN s.status = 'retry' THEN 1 ELSE 0 END) AS retries,
               SUM(CASE WHEN s.status = 'timeout' THEN 1 ELSE 0 END) AS timeouts
        FROM queries q LEFT JOIN stage_calls s ON s.query_id = q.query_id
        GROUP BY q.query_id""")


@migration
def m003_assignment_and_shadow(db: sqlite3.Connection) -> None:
    # Who a query was for and how it was assigned; a sticky=0 row was hashed per request (no id).
    for col, typ in (("user_id", "TEXT"), ("session_id", "TEXT"), ("arm", "TEXT"), ("sticky", "INTEGER"),
                     ("shadow_of", "TEXT")):
        db.execute(f"ALTER TABLE queries ADD COLUMN {col} {typ}")
    db.execute("""
        CREATE TABLE shadow_pairs (
            control_query_id TEXT PRIMARY KEY,
            treatment_query_id TEXT NOT NULL,
            experiment TEXT,
            topk_jaccard REAL,                -- Jaccard of the two context chunk-id sets
            top3_overlap REAL,                -- |top3 ∩ top3| / 3
            answer_similarity REAL,           -- difflib ratio of the two answers
            created_at TEXT NOT NULL
        )""")


# Per query totals over a stage-row source. Unpriced stays unpriced: a query with any row whose cost
# is unknown has cost NULL (its known part is `priced_cost_nano_usd`, a lower bound), never $0.
_QUERY_COSTS_SQL = """
    CREATE VIEW {name} AS
    SELECT q.query_id, q.kind, q.question, q.variant, q.experiment, q.mode, q.status,
           q.started_at, q.latency_ms,
           COALESCE(SUM(s.input_tokens), 0) AS input_tokens,
           COALESCE(SUM(s.output_tokens), 0) AS output_tokens,
           CASE WHEN SUM(s.id IS NOT NULL AND s.cost_nano_usd IS NULL) > 0 THEN NULL
                ELSE CAST(TOTAL(s.cost_nano_usd) AS INTEGER) END AS cost_nano_usd,
           CAST(TOTAL(s.cost_nano_usd) AS INTEGER) AS priced_cost_nano_usd,
           CASE WHEN SUM(s.price_source = 'unpriced') > 0 THEN NULL
                ELSE CAST(TOTAL(s.shadow_cost_nano_usd) AS INTEGER) END AS shadow_cost_nano_usd,
           COALESCE(SUM(s.price_source = 'unpriced'), 0) AS unpriced_rows,
           CAST(TOTAL(CASE WHEN s.status IN ('retry', 'timeout', 'error') THEN s.cost_nano_usd END) AS INTEGER) AS waste_nano_usd,
           COALESCE(SUM(s.status = 'retry'), 0) AS retries,
           COALESCE(SUM(s.status = 'timeout'), 0) AS timeouts,
           COALESCE(SUM(s.usage_source LIKE 'estimated:%'), 0) AS estimated_rows,
           CAST(TOTAL(s.output_at_risk_tokens) AS INTEGER) AS output_at_risk_tokens
    FROM queries q LEFT JOIN {source} s ON s.query_id = q.query_id
    GROUP BY q.query_id"""

# The same view for PostgreSQL, which has no TOTAL() and no SUM over booleans: every figure equals the
# SQLite view's (SUM(cond) -> SUM(CASE WHEN cond THEN 1 ELSE 0 END); CAST(TOTAL(x)) -> COALESCE(SUM(x), 0)).
_QUERY_COSTS_SQL_PG = """
    CREATE VIEW {name} AS
    SELECT q.query_id, q.kind, q.question, q.variant, q.experiment, q.mode, q.status,
           q.started_at, q.latency_ms,
           COALESCE(SUM(s.input_tokens), 0) AS input_tokens,
           COALESCE(SUM(s.output_tokens), 0) AS output_tokens,
           CASE WHEN SUM(CASE WHEN s.id IS NOT NULL AND s.cost_nano_usd IS NULL THEN 1 ELSE 0 END) > 0 THEN NULL
                ELSE CAST(COALESCE(SUM(s.cost_nano_usd), 0) AS INTEGER) END AS cost_nano_usd,
           CAST(COALESCE(SUM(s.cost_nano_usd), 0) AS INTEGER) AS priced_cost_nano_usd,
           CASE WHEN SUM(CASE WHEN s.price_source = 'unpriced' THEN 1 ELSE 0 END) > 0 THEN NULL
                ELSE CAST(COALESCE(SUM(s.shadow_cost_nano_usd), 0) AS INTEGER) END AS shadow_cost_nano_usd,
           SUM(CASE WHEN s.price_source = 'unpriced' THEN 1 ELSE 0 END) AS unpriced_rows,
           CAST(COALESCE(SUM(CASE WHEN s.status IN ('retry', 'timeout', 'error') THEN s.cost_nano_usd END), 0)
                AS INTEGER) AS waste_nano_usd,
           SUM(CASE WHEN s.status = 'retry' THEN 1 ELSE 0 END) AS retries,
           SUM(CASE WHEN s.status = 'timeout' THEN 1 ELSE 0 END) AS timeouts,
           SUM(CASE WHEN s.usage_source LIKE 'estimated:%' THEN 1 ELSE 0 END) AS estimated_rows,
           CAST(COALESCE(SUM(s.output_at_risk_tokens), 0) AS INTEGER) AS output_at_risk_tokens
    FROM queries q LEFT JOIN {source} s ON s.query_id = q.query_id
    GROUP BY q.query_id"""


def _query_costs_sql(db) -> str:
    return _QUERY_COSTS_SQL_PG if dialect(db) == "postgresql" else _QUERY_COSTS_SQL


@migration
def m004_usage_details(db: sqlite3.Connection) -> None:
    # What each provider reported, how we read it, and what re-pricing needs (#12).
    for col, typ in (("cache_write_tokens", "INTEGER NOT NULL DEFAULT 0"),  # prompt tokens written to a cache
                     ("reasoning_tokens", "INTEGER NOT NULL DEFAULT 0"),    # part of output_tokens
                     ("usage_raw", "TEXT"),                # the provider's usage object, JSON, as sent
                     ("usage_source", "TEXT"),             # provider | estimated:<tokenizer> | local
                     ("estimate_note", "TEXT"),            # how an estimate was made (e.g. output = ledger mean)
                     ("output_at_risk_tokens", "INTEGER"), # a timeout may still bill up to this many output tokens
                     ("provider", "TEXT")):                # price-table provider hint, for re-pricing
        db.execute(f"ALTER TABLE stage_calls ADD COLUMN {col} {typ}")
    # Re-pricing never overwrites history: each run appends rows here; the original figures stay.
    db.execute("""
        CREATE TABLE repricings (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            stage_call_id INTEGER NOT NULL REFERENCES stage_calls(id),
            cost_nano_usd INTEGER,            -- NULL = unpriced under the new table
            shadow_cost_nano_usd INTEGER,
            price_version TEXT NOT NULL,
            price_source TEXT NOT NULL,
            repriced_at TEXT NOT NULL
        )""")
    db.execute("CREATE INDEX repricings_call ON repricings(stage_call_id, id)")
    # stage rows with the latest re-priced figures in place of the original ones
    db.execute("""
        CREATE VIEW stage_calls_repriced AS
        SELECT s.id, s.query_id, s.stage, s.call_id, s.attempt, s.status, s.model, s.input_tokens,
               s.output_tokens, s.cached_tokens, s.cache_write_tokens, s.reasoning_tokens, s.usage_source,
               s.output_at_risk_tokens, s.possibly_billed, s.latency_ms, s.cache_hits, s.cache_misses,
               s.error, s.variant, s.experiment, s.started_at, s.ended_at,
               CASE WHEN r.id IS NULL THEN s.cost_nano_usd ELSE r.cost_nano_usd END AS cost_nano_usd,
               CASE WHEN r.id IS NULL THEN s.shadow_cost_nano_usd ELSE r.shadow_cost_nano_usd END AS shadow_cost_nano_usd,
               COALESCE(r.price_version, s.price_version) AS price_version,
               COALESCE(r.price_source, s.price_source) AS price_source
        FROM stage_calls s LEFT JOIN repricings r
          ON r.id = (SELECT MAX(id) FROM repricings WHERE stage_call_id = s.id)""")
    db.execute("DROP VIEW query_costs")
    db.execute(_query_costs_sql(db).format(name="query_costs", source="stage_calls"))
    db.execute(_query_costs_sql(db).format(name="query_costs_repriced", source="stage_calls_repriced"))


@migration
def m005_ledger_durability(db: sqlite3.Connection) -> None:
    # Where a query came from, so each reader picks what it means: live (HTTP /v1/ask), cli (rag ask,
    # demo), replay (rag experiment replay), eval (rag eval), shadow (a shadow experiment's background
    # run). Rows written before this migration cannot be told apart: they keep origin NULL ("unknown").
    db.execute("ALTER TABLE queries ADD COLUMN origin TEXT")
    db.execute("CREATE INDEX queries_origin ON queries(origin, experiment, variant)")
    # An LLM attempt is written as `started` before its request leaves and updated in place when it
    # ends; attempt_id (the callback run id) is the key of that update.
    db.execute("ALTER TABLE stage_calls ADD COLUMN attempt_id TEXT")
    db.execute("CREATE UNIQUE INDEX stage_calls_attempt ON stage_calls(attempt_id)")
    # Rows SQLite rejected (bad type, constraint): kept with the error instead of killing the writer.
    db.execute("""
        CREATE TABLE ledger_quarantine (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            target_table TEXT NOT NULL,
            row_json TEXT NOT NULL,
            error TEXT NOT NULL,
            quarantined_at TEXT NOT NULL
        )""")
    # What the writer could not put in the ledger in time: `spilled` rows went to a spill file (replayed
    # on the next start, then a `replayed` entry), `lost` rows could not be kept anywhere.
    db.execute("""
        CREATE TABLE ledger_losses (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,               -- spilled | lost | replayed
            rows INTEGER NOT NULL,
            reason TEXT,
            spill_path TEXT,
            recorded_at TEXT NOT NULL
        )""")


@migration
def m006_context_budget(db: sqlite3.Connection) -> None:
    # The context-token budget a generate call packed to (RAG_CONTEXT_TOKENS) and what it used: the
    # prompt's size is what a query costs, so the ledger keeps both on the generate rows.
    db.execute("ALTER TABLE stage_calls ADD COLUMN context_budget_tokens INTEGER")
    db.execute("ALTER TABLE stage_calls ADD COLUMN context_tokens INTEGER")


@migration
def m007_report_rollups(db: sqlite3.Connection) -> None:
    # Reports at volume (#11): per-query totals and per-day rollups kept by the ledger writer
    # (tracing/rollups.py), back-filled here; and which API key asked (a short hash, never the token).
    from tracing import rollups

    db.execute("ALTER TABLE queries ADD COLUMN api_key_id TEXT")
    # `started` LLM attempts (unknown outcome) are few: the audit counts them from this small index
    db.execute("CREATE INDEX stage_calls_unknown ON stage_calls(status) WHERE status IN ('started', 'unknown')")
    rollups.create(db)
    rollups.rebuild(db)


@migration
def m008_reprice_reason(db: sqlite3.Connection) -> None:
    # Why a re-priced row changed (#19): "new price version ..." or "new rule ...", with the dated
    # price and time rule in force at the call's start. Rows whose figure did not change get no
    # repricing at all, so every row here is a change.
    db.execute("ALTER TABLE repricings ADD COLUMN reason TEXT")

def applied(db: sqlite3.Connection) -> set[str]:
    """Names already applied (read only: works on a read-only ledger)."""
    return {r[0] for r in db.execute("SELECT name FROM _migrations")} if has_table(db, "_migrations") else set()


def pending(db: sqlite3.Connection) -> list[str]:
    done = applied(db)
    return [fn.__name__ for fn in MIGRATIONS if fn.__name__ not in done]


def migrate(db: sqlite3.Connection) -> list[str]:
    """Apply pending migrations, each in its own explicit transaction; returns the names applied.

    Nothing is written when nothing is pending, so opening an up-to-date read-only ledger works."""
    if not pending(db):
        return []
    if db.in_transaction:
        db.commit()
    saved = db.isolation_level
    db.isolation_level = None  # we issue BEGIN/COMMIT ourselves
    applied_now: list[str] = []
    try:
        for fn in MIGRATIONS:
            db.execute("BEGIN IMMEDIATE")  # take the write lock first: two processes never both migrate
            try:
                if dialect(db) == "postgresql":  # PostgreSQL's DDL takes no database-wide lock: take one
                    db.execute("SELECT pg_advisory_xact_lock(?)", (PG_MIGRATION_LOCK,))
                db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
                if db.execute("SELECT 1 FROM _migrations WHERE name = ?", (fn.__name__,)).fetchone():
                    db.execute("COMMIT")
                    continue
                fn(db)
                # datetime('now')'s format, computed here so both engines store the same text
                db.execute("INSERT INTO _migrations VALUES (?, ?)",
                           (fn.__name__, datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")))
                db.execute("COMMIT")
            except BaseException:
                try:
                    if db.in_transaction:  # SQLite may already have rolled back (e.g. disk full)
                        db.execute("ROLLBACK")
                except Exception:  # connection lost: the server rolled back for us
                    pass
                raise
            applied_now.append(fn.__name__)
    finally:
        db.isolation_level = saved
    return applied_now
