"""Migrations run each in one transaction; ledgers written by earlier releases upgrade in place, rows intact."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import Column, Text

from rag_app.present.cost_render import audit_line
from tracing.ledger import Ledger, LedgerWriter, migrations
from tracing.ledger.engine import make_engine
from tracing.ledger.migrations import MIGRATIONS, add_column, migrate, pending

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"


def columns(conn, table):
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def test_a_migration_failing_halfway_leaves_no_trace_and_a_rerun_succeeds(tmp_path, monkeypatch):
    engine = make_engine(tmp_path / "l.sqlite")
    migrate(engine)
    calls = []

    def m999_two_columns(db):
        add_column(db, "queries", Column("first_col", Text))
        db.exec_driver_sql("CREATE TABLE half_done (x INTEGER)")
        if not calls:
            calls.append(1)
            raise sqlite3.OperationalError("boom after the first column")
        add_column(db, "queries", Column("second_col", Text))

    monkeypatch.setattr(migrations, "MIGRATIONS", [*MIGRATIONS, m999_two_columns])
    with pytest.raises(sqlite3.OperationalError, match="boom"):
        migrations.migrate(engine)
    conn = sqlite3.connect(tmp_path / "l.sqlite")
    assert "first_col" not in columns(conn, "queries")  # the ALTER TABLE was rolled back
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'half_done'").fetchone() is None
    with engine.connect() as db:
        assert migrations.pending(db) == ["m999_two_columns"]
    assert migrations.migrate(engine) == ["m999_two_columns"]  # no "duplicate column name"
    assert {"first_col", "second_col"} <= set(columns(conn, "queries"))
    engine.dispose()


def test_an_earlier_failure_keeps_earlier_migrations_committed(tmp_path, monkeypatch):
    def m998_bad(db):
        add_column(db, "queries", Column("z", Text))
        db.exec_driver_sql("SELECT * FROM no_such_table")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*MIGRATIONS[:2], m998_bad, *MIGRATIONS[2:]])
    engine = make_engine(tmp_path / "l.sqlite")
    with pytest.raises(Exception, match="no_such_table"):
        migrations.migrate(engine)
    conn = sqlite3.connect(tmp_path / "l.sqlite")
    assert [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY rowid")] == [
        m.__name__ for m in MIGRATIONS[:2]]
    assert "z" not in columns(conn, "queries") and not conn.in_transaction
    engine.dispose()


def load_fixture(path: Path, name: str) -> None:
    old = sqlite3.connect(path)
    old.executescript((FIXTURES / name).read_text(encoding="utf-8"))
    old.close()


def test_a_76bf3d6_ledger_upgrades_with_its_rows(tmp_path):
    path = tmp_path / "old.sqlite"
    load_fixture(path, "ledger_76bf3d6.sql")
    before = sqlite3.connect(path)
    q_before = before.execute("SELECT * FROM queries ORDER BY query_id").fetchall()
    s_before = before.execute("SELECT * FROM stage_calls ORDER BY id").fetchall()
    cur = before.execute("SELECT * FROM query_costs ORDER BY query_id")
    old_cost_cols = [d[0] for d in cur.description]
    costs_before = cur.fetchall()
    before.close()

    with Ledger.open(path) as L:  # migrates
        with L.engine.connect() as db:
            assert pending(db) == []
        L.fold_backlog()
        assert L.report().totals["queries"] == 3
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
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


def test_a_0_4_0_ledger_upgrades_in_place_and_its_totals_catch_up_in_batches(tmp_path):
    """The 0.4.0 release's own ledger (m001-m007, rollups included; tests/fixtures/ledger_0.4.0.sql): every
    row survives; m009 does not recompute anything inside the migration, the writers fold every query
    again a batch at a time, and the result equals a rebuild from the rows and the full computation."""
    path = tmp_path / "old.sqlite"
    load_fixture(path, "ledger_0.4.0.sql")
    before = sqlite3.connect(path)
    tables = ("queries", "stage_calls", "shadow_pairs", "repricings", "ledger_quarantine", "ledger_losses")
    rows_before = {t: before.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables}
    assert before.execute("SELECT COUNT(*) FROM _migrations").fetchone()[0] == 7
    before.close()

    with Ledger.open(path) as L:  # migrated on open; nothing folded yet: the audit says the totals are partial
        assert L.audit()["totals_refolding"] is True
        assert "totals being recomputed after an upgrade" in audit_line(L.audit())
    w = LedgerWriter(path)  # a writer starts on it, then folds the backlog in the background
    w.close()
    with Ledger.open(path) as L:
        L.fold_backlog()
        assert L.audit()["totals_backlog_queries"] == 0 and L.audit()["totals_refolding"] is False
        conn = sqlite3.connect(path)
        for t, old in rows_before.items():
            now = conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
            if t == "stage_calls":  # one change, on purpose: the attempt 0.4.0 left `started` is now `unknown`
                assert [r[5] for r in now].count("unknown") == [r[5] for r in old].count("started") == 1
                now = [r[:5] + ("started",) + r[6:18] + (None,) + r[19:] if r[5] == "unknown" else r for r in now]
            assert [r[:len(old[0])] for r in now] == old, t
        rolled = conn.execute("SELECT * FROM report_rollup ORDER BY 1, 2, 3, 4, 5, 6").fetchall()
        report, full = L.report(), L.report_full()
        assert report.totals["queries"] == full.totals["queries"] == 6
        assert report.totals["cost_usd"] == pytest.approx(full.totals["cost_usd"])
        assert report.totals["unknown_attempts"] == 1  # q040-3's attempt never ended: at risk
        repriced = L.report(prices="repriced").totals
        assert repriced["cost_usd"] != report.totals["cost_usd"]  # the re-priced figures are still there
        L.rebuild_totals()
        assert conn.execute("SELECT * FROM report_rollup ORDER BY 1, 2, 3, 4, 5, 6").fetchall() == rolled
