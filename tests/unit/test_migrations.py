"""Migrations run each in one transaction; a ledger written by the previous release upgrades intact."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tracing import migrations
from tracing.ledger import connect
from tracing.migrations import MIGRATIONS, migrate, pending

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ledger_76bf3d6.sql"


def columns(conn, table):
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def test_a_migration_failing_halfway_leaves_no_trace_and_a_rerun_succeeds(tmp_path, monkeypatch):
    conn = sqlite3.connect(tmp_path / "l.sqlite")
    migrate(conn)
    calls = []

    def m999_two_columns(db):
        db.execute("ALTER TABLE queries ADD COLUMN first_col TEXT")
        db.execute("CREATE TABLE half_done (x INTEGER)")
        if not calls:
            calls.append(1)
            raise sqlite3.OperationalError("boom after the first column")
        db.execute("ALTER TABLE queries ADD COLUMN second_col TEXT")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*MIGRATIONS, m999_two_columns])
    with pytest.raises(sqlite3.OperationalError, match="boom"):
        migrations.migrate(conn)
    assert "first_col" not in columns(conn, "queries")  # the ALTER TABLE was rolled back
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'half_done'").fetchone() is None
    assert migrations.pending(conn) == ["m999_two_columns"]
    assert migrations.migrate(conn) == ["m999_two_columns"]  # no "duplicate column name"
    assert {"first_col", "second_col"} <= set(columns(conn, "queries"))


def test_an_earlier_failure_keeps_earlier_migrations_committed(tmp_path, monkeypatch):
    def m998_bad(db):
        db.execute("ALTER TABLE queries ADD COLUMN z TEXT")
        db.execute("SELECT * FROM no_such_table")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*MIGRATIONS[:2], m998_bad, *MIGRATIONS[2:]])
    conn = sqlite3.connect(tmp_path / "l.sqlite")
    with pytest.raises(sqlite3.OperationalError):
        migrations.migrate(conn)
    assert [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY rowid")] == [
        m.__name__ for m in MIGRATIONS[:2]]
    assert "z" not in columns(conn, "queries") and not conn.in_transaction


def test_previous_release_ledger_upgrades_with_its_rows(tmp_path):
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.executescript(FIXTURE.read_text(encoding="utf-8"))
    old.close()
    before = sqlite3.connect(path)
    assert pending(before) == [m.__name__ for m in MIGRATIONS if m.__name__ not in
                               ("m001_initial", "m002_query_costs_view", "m003_assignment_and_shadow")]
    q_before = before.execute("SELECT * FROM queries ORDER BY query_id").fetchall()
    s_before = before.execute("SELECT * FROM stage_calls ORDER BY id").fetchall()
    cur = before.execute("SELECT * FROM query_costs ORDER BY query_id")
    old_cost_cols = [d[0] for d in cur.description]
    costs_before = cur.fetchall()
    before.close()

    conn = connect(path)  # migrates
    assert pending(conn) == []
    assert "origin" in columns(conn, "queries") and "attempt_id" in columns(conn, "stage_calls")
    n_old = len(q_before[0])
    assert [tuple(r)[:n_old] for r in conn.execute("SELECT * FROM queries ORDER BY query_id")] == [tuple(r) for r in q_before]
    assert [r["origin"] for r in conn.execute("SELECT origin FROM queries")] == [None] * 3  # unknown, not "live"
    n_old = len(s_before[0])
    assert [tuple(r)[:n_old] for r in conn.execute("SELECT * FROM stage_calls ORDER BY id")] == [tuple(r) for r in s_before]
    # later migrations may add columns to the view; every column the old release had keeps its value
    assert [tuple(r[c] for c in old_cost_cols) for r in conn.execute("SELECT * FROM query_costs ORDER BY query_id")] \
        == [tuple(r) for r in costs_before]
    assert conn.execute("SELECT COUNT(*) FROM shadow_pairs").fetchone()[0] == 1
    # new rows go in beside the old ones
    conn.execute("INSERT INTO stage_calls (query_id, stage, status, started_at, attempt_id) VALUES ('n', 'generate', 'started', 't', 'a1')")
    conn.commit()
    assert conn.execute("SELECT MAX(id) FROM stage_calls").fetchone()[0] == len(s_before) + 1
