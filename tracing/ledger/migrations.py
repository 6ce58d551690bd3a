"""Ledger schema changes as a list of small migrations (after simonw/llm), each applied once, in order,
in ONE transaction together with its record in `_migrations`, under a lock: BEGIN IMMEDIATE on
SQLite, a transaction-scoped advisory lock on PostgreSQL, so replicas starting together apply each
exactly once and a migration failing halfway leaves nothing behind. Never edit what a shipped
migration does: add one.

The DDL is SQLAlchemy's, compiled for the engine at hand (CreateTable, CreateColumn, CreateIndex, the
views of views.py): no SQL is translated between dialects. Only the triggers of m009 are written per
engine, because SQL has no portable trigger syntax. Why not Alembic: 0.4.0 ledgers record their
migrations here by name; Alembic would need its own version table, a stamp step on every existing
ledger and an env/revision tree, while what it would give us (portable ADD COLUMN, partial indexes)
SQLAlchemy Core compiles already. The locking is ours either way.

Back-fills run in batches after the migration, never inside it: a migration that changes what the
totals hold marks the queries dirty (`rollup_dirty`) and the writers fold them in a batch at a time
(tracing/ledger/rollups.py), so a million-query ledger is never held for minutes.
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import (
    Column,
    Connection,
    Index,
    MetaData,
    Table,
    Text,
    func,
    insert,
    inspect,
    select,
    text,
    union,
)
from sqlalchemy.schema import CreateColumn, CreateIndex, CreateTable, DDLElement

from tracing.ledger import schema as S
from tracing.ledger import views
from tracing.ledger.schema import FLOAT, INT

PG_MIGRATION_LOCK = 0x7261676C  # pg_advisory_xact_lock key for "migrating the ledger" ("ragl")
Migration = Callable[[Connection], None]
MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    MIGRATIONS.append(fn)
    return fn


# -- DDL helpers: SQLAlchemy compiles each for the connection's engine -----------------------------------
def _pg(db: Connection) -> bool:
    return db.dialect.name == "postgresql"


def _ddl(db: Connection, element: DDLElement) -> None:
    db.execute(element)


def create_table(db: Connection, name: str, *columns: Column, autoincrement: bool = False) -> Table:
    """A table as it was when a migration created it (later migrations add to it)."""
    t = Table(name, MetaData(), *columns, sqlite_autoincrement=autoincrement)
    _ddl(db, CreateTable(t))
    return t


def add_column(db: Connection, table: str, column: Column) -> None:
    Table(table, MetaData(), column)  # binds the column to a table so it compiles
    spec = CreateColumn(column).compile(dialect=db.dialect)
    db.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {spec}")


def create_index(db: Connection, index: Index) -> None:
    _ddl(db, CreateIndex(index))


def create_view(db: Connection, name: str, selectable) -> None:
    body = selectable.compile(dialect=db.dialect, compile_kwargs={"literal_binds": True})
    db.exec_driver_sql(f"CREATE VIEW {name} AS {body}")


def drop_view(db: Connection, name: str) -> None:
    db.exec_driver_sql(f"DROP VIEW IF EXISTS {name}")


def _id() -> Column:
    return Column("id", INT, primary_key=True, autoincrement=True)


def _i0(name: str) -> Column:
    return Column(name, INT, nullable=False, server_default=text("0"))


# -- the migrations --------------------------------------------------------------------------------------
@migration
def m001_initial(db: Connection) -> None:
    q = create_table(db, "queries", Column("query_id", Text, primary_key=True), Column("kind", Text, nullable=False),
                     Column("question", Text), Column("variant", Text), Column("experiment", Text), Column("mode", Text),
                     Column("status", Text, nullable=False), Column("error", Text),
                     Column("started_at", Text, nullable=False), Column("ended_at", Text), Column("latency_ms", FLOAT))
    s = create_table(db, "stage_calls", _id(), Column("query_id", Text, nullable=False),
                     Column("stage", Text, nullable=False), Column("call_id", Text),
                     Column("attempt", INT, nullable=False, server_default=text("1")),
                     Column("status", Text, nullable=False), Column("model", Text), _i0("input_tokens"),
                     _i0("output_tokens"), _i0("cached_tokens"), Column("cost_nano_usd", INT),
                     Column("shadow_cost_nano_usd", INT), Column("price_version", Text), Column("price_source", Text),
                     _i0("possibly_billed"), Column("latency_ms", FLOAT), Column("cache_hits", INT),
                     Column("cache_misses", INT), Column("error", Text), Column("variant", Text),
                     Column("experiment", Text), Column("started_at", Text, nullable=False), Column("ended_at", Text),
                     autoincrement=True)
    create_index(db, Index("stage_calls_query", s.c.query_id))
    create_index(db, Index("stage_calls_started", s.c.started_at))
    create_index(db, Index("queries_started", q.c.started_at))


@migration
def m002_query_costs_view(db: Connection) -> None:
    # Totals per query in one place, so CLI reports and the dashboard read the same numbers. (m004 and
    # m009 redefine it; a ledger made today gets the current definition from m009.)
    q, s = S.queries, S.stage_calls
    create_view(db, "query_costs", select(
        q.c.query_id, q.c.kind, q.c.question, q.c.variant, q.c.experiment, q.c.mode, q.c.status, q.c.started_at,
        q.c.latency_ms, func.coalesce(func.sum(s.c.input_tokens), 0).label("input_tokens"),
        func.coalesce(func.sum(s.c.output_tokens), 0).label("output_tokens"),
        func.coalesce(func.sum(s.c.cost_nano_usd), 0).label("cost_nano_usd"),
    ).select_from(q.outerjoin(s, s.c.query_id == q.c.query_id)).group_by(q.c.query_id))


@migration
def m003_assignment_and_shadow(db: Connection) -> None:
    # Who a query was for and how it was assigned; a sticky=0 row was hashed per request (no id).
    for col in (Column("user_id", Text), Column("session_id", Text), Column("arm", Text), Column("sticky", INT),
                Column("shadow_of", Text)):
        add_column(db, "queries", col)
    create_table(db, "shadow_pairs", Column("control_query_id", Text, primary_key=True),
                 Column("treatment_query_id", Text, nullable=False), Column("experiment", Text),
                 Column("topk_jaccard", FLOAT), Column("top3_overlap", FLOAT), Column("answer_similarity", FLOAT),
                 Column("created_at", Text, nullable=False))


@migration
def m004_usage_details(db: Connection) -> None:
    # What each provider reported, how we read it, and what re-pricing needs (#12).
    for col in (_i0("cache_write_tokens"), _i0("reasoning_tokens"), Column("usage_raw", Text),
                Column("usage_source", Text), Column("estimate_note", Text), Column("output_at_risk_tokens", INT),
                Column("provider", Text)):
        add_column(db, "stage_calls", col)
    # Re-pricing never overwrites history: each run appends rows here; the original figures stay.
    r = create_table(db, "repricings", _id(), Column("stage_call_id", INT, nullable=False),
                     Column("cost_nano_usd", INT), Column("shadow_cost_nano_usd", INT),
                     Column("price_version", Text, nullable=False), Column("price_source", Text, nullable=False),
                     Column("repriced_at", Text, nullable=False), autoincrement=True)
    create_index(db, Index("repricings_call", r.c.stage_call_id, r.c.id))
    _create_views(db)


def _create_views(db: Connection) -> None:
    drop_view(db, "query_costs_repriced")
    drop_view(db, "query_costs")
    drop_view(db, "stage_calls_repriced")
    create_view(db, "stage_calls_repriced", views.stage_calls_repriced())
    create_view(db, "query_costs", views.query_costs(S.stage_calls))
    create_view(db, "query_costs_repriced", views.query_costs(views.stage_calls_repriced().subquery("s")))


@migration
def m005_ledger_durability(db: Connection) -> None:
    # Where a query came from (live, cli, replay, eval, shadow), so each reader picks what it means;
    # rows written before this migration keep origin NULL ("unknown").
    add_column(db, "queries", Column("origin", Text))
    create_index(db, Index("queries_origin", S.queries.c.origin, S.queries.c.experiment, S.queries.c.variant))
    # An LLM attempt is written `started` before its request leaves and replaced when it ends.
    add_column(db, "stage_calls", Column("attempt_id", Text))
    create_index(db, Index("stage_calls_attempt", S.stage_calls.c.attempt_id, unique=True))
    create_table(db, "ledger_quarantine", _id(), Column("target_table", Text, nullable=False),
                 Column("row_json", Text, nullable=False), Column("error", Text, nullable=False),
                 Column("quarantined_at", Text, nullable=False), autoincrement=True)
    create_table(db, "ledger_losses", _id(), Column("kind", Text, nullable=False), Column("rows", INT, nullable=False),
                 Column("reason", Text), Column("spill_path", Text), Column("recorded_at", Text, nullable=False),
                 autoincrement=True)


@migration
def m006_context_budget(db: Connection) -> None:
    # The context-token budget a generate call packed to and what it used, on its rows.
    add_column(db, "stage_calls", Column("context_budget_tokens", INT))
    add_column(db, "stage_calls", Column("context_tokens", INT))


M009_INDEXES = {"query_totals_orphans"}
M020_INDEXES = {"query_totals_key_started", "query_totals_user_started"}  # m022 adds query_id to both
M022_INDEXES = {"query_totals_grounded", *(f"query_totals_{name}" for name in S.QUALITY_FILTERS)}


@migration
def m007_report_rollups(db: Connection) -> None:
    # Reports at volume (#11): per-query totals and per-day rollups kept by the ledger writer; and which
    # API key asked (a short hash, never the token). Created as 0.4.0 had them; m009 adds to them.
    add_column(db, "queries", Column("api_key_id", Text))
    create_index(db, Index("stage_calls_unknown", S.stage_calls.c.status,
                           sqlite_where=text("status IN ('started', 'unknown')"),
                           postgresql_where=text("status IN ('started', 'unknown')")))
    m009_only = {"unknown_attempts", "unknown_cost_nano_usd", "retrieve_model", "shadow_part_nano_usd",
                 "cache_hit", "saved_cost_nano_usd", "saved_unpriced", *S.ROLLUP_CACHE_SUMS,
                 *(f"{st}_called_rows" for st in S.MODEL_STAGES),  # added later (m009, m011, m012, m017, m020,
                 *S.ROLLUP_M020_SUMS, *S.ROLLUP_QUALITY_SUMS}       # m022)
    totals = Table("query_totals", MetaData(), *(c._copy() for c in S.query_totals.columns if c.name not in m009_only))
    _ddl(db, CreateTable(totals))
    for ix in S.query_totals.indexes:
        if ix.name in M009_INDEXES | M020_INDEXES | M022_INDEXES:
            continue
        create_index(db, Index(ix.name, *(totals.c[c.name] for c in ix.columns), **ix.dialect_kwargs))
    rollup = Table("report_rollup", MetaData(), *(c._copy() for c in S.report_rollup.columns if c.name not in m009_only))
    _ddl(db, CreateTable(rollup))
    create_table(db, "rollup_state", Column("name", Text, primary_key=True), Column("value", Text))
    # the existing rows are folded in afterwards, a batch at a time by the writers, never here in one go
    from tracing.ledger import rollups

    rollups.start_refold(db, ("stage_calls", "queries"))


def _refold_everything(db: Connection) -> None:
    """Empty the totals and rollups; the writers compute them again from the rows, a batch at a time."""
    from tracing.ledger import rollups

    db.execute(S.report_rollup.delete())
    db.execute(S.query_totals.delete())
    for name in ("refold:stage_calls", "refold:queries", "refold:query_totals"):
        rollups.set_state(db, name, None)
    rollups.start_refold(db, ("stage_calls", "queries"))


@migration
def m008_reprice_reason(db: Connection) -> None:
    # Why a re-priced row changed (#19): a new price version or a new time rule.
    add_column(db, "repricings", Column("reason", Text))


@migration
def m009_one_repository(db: Connection) -> None:
    # 0.5.0 (#18): which writer wrote a `started` row (a dead writer's become `unknown`); the writers'
    # heartbeats; the retrieve stage's model in the totals (the model dim then books the rescore
    # embedding too); unknown attempts at risk in the totals; the dirty marks that fold in rows however
    # they were written; views from the one SQLAlchemy definition.
    add_column(db, "stage_calls", Column("writer_id", Text))
    add_column(db, "query_totals", Column("retrieve_model", Text))
    for col in ("unknown_attempts", "unknown_cost_nano_usd"):
        add_column(db, "query_totals", _i0(col))
        add_column(db, "report_rollup", _i0(col))
    for t in (S.rollup_dirty, S.ledger_writers):
        _ddl(db, CreateTable(t))
    _create_triggers(db)
    _create_views(db)
    for ix in S.query_totals.indexes:
        if ix.name in M009_INDEXES:
            create_index(db, ix)
    # The totals gain columns and the model dim counts retrieve's model: they are computed again from the
    # rows by the writers, a batch of queries per transaction in key order, never inside this transaction
    # (a million-query ledger is not held for minutes as m007's back-fill held it); reports say they are
    # catching up meanwhile.
    _refold_everything(db)


@migration
def m010_experiment_events(db: Connection) -> None:
    # 0.5.0: the ramp's moves, read by every replica (rag_app/experiments/ramp.py).
    _ddl(db, CreateTable(S.experiment_events))


@migration
def m011_shadow_part(db: Connection) -> None:
    # 0.5.0: the rollups also sum every known shadow (rows of a query with an unpriced row included), so the
    # overall, per-user, per-variant and per-day shadows add up to the per-stage and per-model ones. The
    # totals and rollups are computed again from the rows by the writers, a batch at a time, as after m009.
    add_column(db, "report_rollup", _i0("shadow_part_nano_usd"))
    _refold_everything(db)


M012_INDEXES = {"queries_key_started", "queries_user_started", "queries_variant_started"}


@migration
def m012_spend_control(db: Connection) -> None:
    # Spend control (#23): admitted queries whose rows have not landed yet (their estimate counts against a
    # budget meanwhile, on every replica) and the events budgets raise; answer-cache hits and what they
    # saved, on the query rows, the totals and the rollups (every query before this had no hit: zeros hold).
    for t in (S.budget_reservations, S.budget_events):
        _ddl(db, CreateTable(t))
        for ix in t.indexes:
            create_index(db, ix)
    for col in ("cache_hit", "saved_cost_nano_usd"):
        add_column(db, "queries", Column(col, INT))
    for ix in S.queries.indexes:
        if ix.name in M012_INDEXES:
            create_index(db, ix)
    for col in ("cache_hit", "saved_cost_nano_usd", "saved_unpriced"):
        add_column(db, "query_totals", _i0(col))
    for col in S.ROLLUP_CACHE_SUMS:
        add_column(db, "report_rollup", _i0(col))


@migration
def m013_answer_quality(db: Connection) -> None:
    # every answer's quality signals beside its cost (rag_app/quality/signals.py)
    _ddl(db, CreateTable(S.query_quality, if_not_exists=True))


@migration
def m014_query_feedback(db: Connection) -> None:
    # users' word on an answer: right, unsure or wrong, with a comment (docs/quality.md)
    _ddl(db, CreateTable(S.query_feedback, if_not_exists=True))


@migration
def m015_row_says_where_and_why(db: Connection) -> None:
    # each priced row: the endpoint it was sent to (its provider is in `provider`), so `rag reprice` prices it
    # where it was sent, never by the shell's OPENAI_BASE_URL; the time rule applied, the dated price's
    # effective date and any warning (a holiday calendar that does not cover the call's year)
    for name in ("endpoint", "price_rule", "price_effective_from", "price_warning"):
        add_column(db, "stage_calls", Column(name, Text))


@migration
def m016_row_says_its_rate(db: Connection) -> None:
    # each priced row: the currency of the price used, the cost in that currency (exact decimal text, e.g.
    # 0.01672 CNY) and the exchange rate it was converted at, so a CNY row shows its own yuan
    for name in ("price_currency", "native_cost", "fx_rate"):
        add_column(db, "stage_calls", Column(name, Text))


@migration
def m017_model_queries_called(db: Connection) -> None:
    # `--by model` divides a model's cost by the queries that called it: each model stage's rows that were not
    # `skipped` (an extractive answer names the LLM it never called). Totals and rollups are computed again
    # from the rows by the writers, a batch at a time, as after m011.
    for st in S.MODEL_STAGES:
        add_column(db, "query_totals", _i0(f"{st}_called_rows"))
    _refold_everything(db)


M019_KEY_COLUMNS = ("can_replace", "can_create_collections", "max_collections")


@migration
def m018_keys_and_teams(db: Connection) -> None:
    # issued API keys, their audit trail and per-minute rate windows (rag_app/access/); the tables as they
    # were then (m019 adds to api_keys and replaces rate_windows)
    keys = Table("api_keys", MetaData(), *(c._copy() for c in S.api_keys.c if c.name not in M019_KEY_COLUMNS))
    windows = Table("rate_windows", MetaData(), Column("key_name", Text, primary_key=True),
                    Column("window_start", Text, primary_key=True), _i0("requests"), _i0("tokens"))
    for t in (keys, S.key_audit, windows):
        _ddl(db, CreateTable(t, if_not_exists=True))
        for ix in t.indexes:
            create_index(db, ix)


@migration
def m019_tenants_apart(db: Connection) -> None:
    # #46: replacing a document and creating collections are rights of their own; rate limits read a
    # sliding window of admitted requests with their reserved tokens instead of per-minute counters
    for name in M019_KEY_COLUMNS:
        add_column(db, "api_keys", S.api_keys.c[name]._copy())
    _ddl(db, CreateTable(S.rate_events, if_not_exists=True))
    for ix in S.rate_events.indexes:
        create_index(db, ix)
    db.exec_driver_sql("DROP TABLE IF EXISTS rate_windows")


@migration
def m020_every_stage_and_evaluation(db: Connection) -> None:
    # Money on every path (#45): each query's rows per stage, whatever the stage (rewrite, judge, any added
    # later), which the stage and model breakdowns read instead of a fixed list; output tokens at risk priced
    # at their row's output rate; evaluation spend (judge runs) in the rollups of every dim beside the
    # answers'; the indexes a budget learns a key's or user's cost per question from. The totals and rollups
    # are computed again from the rows by the writers, a batch at a time, as after m017.
    add_column(db, "stage_calls", Column("output_at_risk_nano_usd", INT))
    add_column(db, "query_totals", _i0("output_at_risk_nano_usd"))
    for col in S.ROLLUP_M020_SUMS:
        add_column(db, "report_rollup", _i0(col))
    _ddl(db, CreateTable(S.query_stage_totals, if_not_exists=True))
    # the indexes as they were then (m022 adds query_id), on a copy: an Index joins the Table it names
    t = Table("query_totals", MetaData(), *(S.query_totals.c[c]._copy() for c in ("kind", "api_key_id", "user_id",
                                                                                   "started_at")))
    create_index(db, Index("query_totals_key_started", t.c.kind, t.c.api_key_id, t.c.started_at))
    create_index(db, Index("query_totals_user_started", t.c.kind, t.c.user_id, t.c.started_at))
    db.execute(S.query_stage_totals.delete())
    _refold_everything(db)


@migration
def m021_cache_hit_origin(db: Connection) -> None:
    # Savings re-priced (#45): which query's answer a hit served (its rows are what a live call would bill) and
    # what the hit's saving could not be sure of (a holiday calendar missing its year); re-priced savings apart.
    add_column(db, "queries", Column("cached_from", Text))
    add_column(db, "queries", Column("price_warning", Text))
    _ddl(db, CreateTable(S.saving_repricings, if_not_exists=True))
    for ix in S.saving_repricings.indexes:
        create_index(db, ix)


@migration
def m022_hour_rollups_and_quality_totals(db: Connection) -> None:
    # An experiment's arms hour by hour (`rag experiment compare --over-time`, the dashboard's experiment page)
    # and each answer's quality in its totals and the rollups, so those pages, the reports and the verdict add
    # up rollups instead of reading every scored answer (at a million scored queries the experiment page read
    # 3M quality rows, 15 s). The rollups gain dim `hour` (value 00-23 beside the day): the queries already
    # folded get theirs here, from their totals, in one grouped insert (every other report stays whole). The
    # totals and rollups gain the quality sums (0: nothing counted yet); a quality or feedback row now marks
    # its query dirty as its stage rows do, and every query with either is marked now, so the writers fold
    # its quality in, a batch at a time (reports say they are catching up meanwhile; its cost shares cancel).
    from tracing.ledger.shares import shares_select

    for col in S.QUALITY_INT_SUMS:
        add_column(db, "query_totals", _i0(col))
        add_column(db, "report_rollup", _i0(col))
    for col in S.QUALITY_FLOAT_SUMS:
        add_column(db, "query_totals", Column(col, FLOAT, nullable=False, server_default=text("0")))
        add_column(db, "report_rollup", Column(col, FLOAT, nullable=False, server_default=text("0")))
    for name in M020_INDEXES:  # m020's, with query_id: the list by user or key walks them newest first
        db.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")
    for ix in S.query_totals.indexes:  # the query list's filters: by user, by key, by quality
        if ix.name in M020_INDEXES | M022_INDEXES:
            create_index(db, ix)
    t = S.query_totals
    done = select(t).where(t.c.kind.in_(("query", "judge"))).subquery("t")  # what the fold rolls up
    db.execute(insert(S.report_rollup).from_select([*S.ROLLUP_KEYS, *S.ROLLUP_SUMS], shares_select(done, dims=("hour",))))
    _create_triggers(db, ("query_quality", "query_feedback"))
    d = S.rollup_dirty
    scored = union(select(S.query_quality.c.query_id), select(S.query_feedback.c.query_id)).subquery("scored")
    db.execute(insert(d).from_select(["query_id"], select(scored.c.query_id).where(
        ~select(d.c.query_id).where(d.c.query_id == scored.c.query_id).exists())))


@migration
def m023_query_citations(db: Connection) -> None:
    # the passages each answer cited: what `rag train-adapter --from-feedback` pairs with users' marks
    _ddl(db, CreateTable(S.query_citations, if_not_exists=True))


def _create_triggers(db: Connection, tables: tuple[str, ...] = ("queries", "stage_calls")) -> None:
    """Any insert, update or delete of a query's rows marks it dirty, whoever writes: the writers fold
    dirty queries into the totals, so the totals cannot drift from rows written around the writer."""
    if _pg(db):
        db.exec_driver_sql(
            "CREATE OR REPLACE FUNCTION rag_mark_dirty() RETURNS trigger AS $$ BEGIN "
            "IF TG_OP <> 'INSERT' THEN INSERT INTO rollup_dirty (query_id) VALUES (OLD.query_id) "
            "ON CONFLICT DO NOTHING; END IF; "
            "IF TG_OP <> 'DELETE' THEN INSERT INTO rollup_dirty (query_id) VALUES (NEW.query_id) "
            "ON CONFLICT DO NOTHING; END IF; RETURN NULL; END $$ LANGUAGE plpgsql")
        for table in tables:
            db.exec_driver_sql(f"CREATE TRIGGER {table}_dirty AFTER INSERT OR UPDATE OR DELETE ON {table} "
                               "FOR EACH ROW EXECUTE FUNCTION rag_mark_dirty()")
        return
    # SQLite: not INSERT OR IGNORE, which an outer statement's conflict rule (an upsert's ABORT) overrides
    for table in tables:
        for event, rows in (("INSERT", ("NEW",)), ("UPDATE", ("OLD", "NEW")), ("DELETE", ("OLD",))):
            body = " ".join(f"INSERT INTO rollup_dirty (query_id) SELECT {r}.query_id WHERE NOT EXISTS "
                            f"(SELECT 1 FROM rollup_dirty WHERE query_id = {r}.query_id);" for r in rows)
            db.exec_driver_sql(f"CREATE TRIGGER {table}_dirty_{event.lower()} AFTER {event} ON {table} "
                               f"BEGIN {body} END")


# -- applying them ---------------------------------------------------------------------------------------
def applied(db: Connection) -> set[str]:
    """Names already applied (read only: works on a read-only ledger)."""
    if not inspect(db).has_table("_migrations"):
        return set()
    return {r[0] for r in db.execute(select(S.migrations_table.c.name))}


def pending(db: Connection) -> list[str]:
    done = applied(db)
    return [fn.__name__ for fn in MIGRATIONS if fn.__name__ not in done]


def migrate(engine) -> list[str]:
    """Apply pending migrations, each in its own locked transaction; returns the names applied.
    Nothing is written when nothing is pending, so opening an up-to-date read-only ledger works."""
    with engine.connect() as db:
        with db.begin():
            todo = pending(db)
        if not todo:
            return []
        done: list[str] = []
        for fn in MIGRATIONS:
            if fn.__name__ not in todo:
                continue
            with db.begin():  # BEGIN IMMEDIATE on SQLite (tracing/ledger/engine.py): the write lock first
                if _pg(db):  # PostgreSQL's DDL takes no database-wide lock: take one
                    db.execute(select(func.pg_advisory_xact_lock(PG_MIGRATION_LOCK)))
                _ddl(db, CreateTable(S.migrations_table, if_not_exists=True))
                if db.execute(select(S.migrations_table.c.name).where(S.migrations_table.c.name == fn.__name__)).first():
                    continue  # another process applied it while we waited for the lock
                fn(db)
                db.execute(insert(S.migrations_table).values(
                    name=fn.__name__, applied_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")))
            done.append(fn.__name__)
        if done and not _pg(db):  # the migrations' pages out of the WAL (outside any transaction)
            db.connection.dbapi_connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return done


