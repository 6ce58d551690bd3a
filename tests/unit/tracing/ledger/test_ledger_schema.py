"""Migrate an empty ledger and compare the exact schema (after simonw/llm's test_migrate)."""
from __future__ import annotations

import sqlite3

import sqlite_utils

from tracing.ledger import MIGRATIONS, Ledger
from tracing.ledger.schema import metadata

EXPECTED_STAGE_CALLS = {
    "id": int, "query_id": str, "stage": str, "call_id": str, "attempt": int, "status": str, "model": str,
    "input_tokens": int, "output_tokens": int, "cached_tokens": int, "cost_nano_usd": int,
    "shadow_cost_nano_usd": int, "price_version": str, "price_source": str, "possibly_billed": int,
    "latency_ms": float, "cache_hits": int, "cache_misses": int, "error": str, "variant": str,
    "experiment": str, "started_at": str, "ended_at": str,
    # m004_usage_details
    "cache_write_tokens": int, "reasoning_tokens": int, "usage_raw": str, "usage_source": str,
    "estimate_note": str, "output_at_risk_tokens": int, "provider": str,
    # m005_ledger_durability
    "attempt_id": str,
    # m006_context_budget
    "context_budget_tokens": int, "context_tokens": int,
    # m009_one_repository
    "writer_id": str,
    # m015_row_says_where_and_why
    "endpoint": str, "price_rule": str, "price_effective_from": str, "price_warning": str,
    # m016_row_says_its_rate
    "price_currency": str, "native_cost": str, "fx_rate": str,
    "output_at_risk_nano_usd": int,  # m020: the output tokens at risk at the row's own output rate
}
EXPECTED_REPRICINGS = {
    "id": int, "stage_call_id": int, "cost_nano_usd": int, "shadow_cost_nano_usd": int, "price_version": str,
    "price_source": str, "repriced_at": str, "reason": str,  # m008_reprice_reason
}
EXPECTED_QUERIES = {
    "query_id": str, "kind": str, "question": str, "variant": str, "experiment": str, "mode": str,
    "status": str, "error": str, "started_at": str, "ended_at": str, "latency_ms": float,
    "user_id": str, "session_id": str, "arm": str, "sticky": int, "shadow_of": str, "origin": str,
    "api_key_id": str,  # m007_report_rollups
    "cache_hit": int, "saved_cost_nano_usd": int,  # m010_spend_control
    "cached_from": str, "price_warning": str,  # m021_cache_hit_origin
}
EXPECTED_SHADOW_PAIRS = {
    "control_query_id": str, "treatment_query_id": str, "experiment": str, "topk_jaccard": float,
    "top3_overlap": float, "answer_similarity": float, "created_at": str,
}


def test_migrate_empty_db_gives_exact_schema(tmp_path):
    Ledger.open(tmp_path / "ledger.sqlite").close()
    conn = sqlite3.connect(tmp_path / "ledger.sqlite")
    db = sqlite_utils.Database(conn)
    assert db["stage_calls"].columns_dict == EXPECTED_STAGE_CALLS
    assert db["queries"].columns_dict == EXPECTED_QUERIES
    assert db["shadow_pairs"].columns_dict == EXPECTED_SHADOW_PAIRS
    assert db["repricings"].columns_dict == EXPECTED_REPRICINGS
    assert {"query_costs", "query_costs_repriced", "stage_calls_repriced"} <= set(db.view_names())
    assert [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY rowid")] == [m.__name__ for m in MIGRATIONS]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_the_migrations_build_exactly_the_schema_the_code_describes(tmp_path):
    """The Table objects are the one description: every table and column the migrations make is in
    them, with the same type affinity, and the other way round."""
    Ledger.open(tmp_path / "ledger.sqlite").close()
    db = sqlite_utils.Database(sqlite3.connect(tmp_path / "ledger.sqlite"))
    for table in metadata.sorted_tables:
        built = db[table.name].columns_dict
        described = {c.name: c.type.python_type if hasattr(c.type, "python_type") else None for c in table.columns}
        assert set(built) == set(described), table.name
        for name, typ in built.items():
            want = described[name]
            assert typ is want or (typ is float and want is float) or (typ is int and want is int), (table.name, name)
    made = set(db.table_names()) - {"sqlite_sequence"}
    assert made == {t.name for t in metadata.sorted_tables}


def test_migrate_is_idempotent(tmp_path):
    from tracing.ledger import migrate
    from tracing.ledger.engine import make_engine

    engine = make_engine(tmp_path / "l.sqlite")
    assert migrate(engine) == [m.__name__ for m in MIGRATIONS]
    assert migrate(engine) == []
    engine.dispose()
