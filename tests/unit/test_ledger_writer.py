"""The writer never dies, never blocks a query, and accounts for every row it could not write."""
from __future__ import annotations

import json
import sqlite3
import time

from tracing.ledger import LedgerWriter, open_read


def row(i, **kw):
    return {"query_id": f"q{i}", "stage": "retrieve", "status": "ok", "started_at": "2026-11-29T00:00:00+00:00", **kw}


def count(path, table="stage_calls"):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


def test_rejected_rows_are_quarantined_and_the_rest_of_the_batch_is_written(tmp_path):
    path = tmp_path / "l.sqlite"
    w = LedgerWriter(path)
    w.put("stage_calls", row(1))
    w.put("stage_calls", row(2, no_such_column=1))           # unknown column
    w.put("stage_calls", row(3, input_tokens={"not": "an int"}))  # a type SQLite cannot bind
    w.put("stage_calls", {"query_id": "q4", "stage": "x"})  # NOT NULL status/started_at
    w.put("stage_calls", row(5))
    assert w.flush(5)
    assert w.health()["status"] == "ok" and w.health()["writer_alive"]
    w.put("stage_calls", row(6))  # the thread is alive and keeps writing
    assert w.flush(5)
    w.close()
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT query_id FROM stage_calls ORDER BY id")] == ["q1", "q5", "q6"]
    q = conn.execute("SELECT target_table, row_json, error FROM ledger_quarantine ORDER BY id").fetchall()
    assert [json.loads(r[1])["query_id"] for r in q] == ["q2", "q3", "q4"]
    assert "no_such_column" in q[0][2] and "binding" in q[1][2].lower() and "NOT NULL" in q[2][2]
    assert w.quarantined == 3 and w.written == 3


def test_past_the_buffer_bound_rows_spill_and_the_next_writer_replays_them(tmp_path):
    path = tmp_path / "l.sqlite"
    w = LedgerWriter(path, max_buffer=20, batch=5, spill_dir=tmp_path / "spill")
    t0 = time.perf_counter()
    for i in range(500):
        w.put("stage_calls", row(i))
    assert time.perf_counter() - t0 < 5  # put() never waits for the disk
    assert w.flush(10)
    w.close()
    assert w.spilled > 0 and w.lost == 0 and w.written + w.spilled == 500
    assert count(path) == w.written
    w2 = LedgerWriter(path, spill_dir=tmp_path / "spill")
    assert w2.flush(10)
    w2.close()
    assert count(path) == 500 and w2.replayed == w.spilled
    conn = sqlite3.connect(path)
    kinds = dict(conn.execute("SELECT kind, SUM(rows) FROM ledger_losses GROUP BY kind").fetchall())
    assert kinds == {"spilled": w.spilled, "replayed": w.spilled}
    assert not path.with_suffix(".unwritten.jsonl").exists()


def test_flush_is_bounded(tmp_path):
    w = LedgerWriter(tmp_path / "l.sqlite")
    blocker = sqlite3.connect(tmp_path / "l.sqlite", timeout=0)
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    w.put("stage_calls", row(1))
    t0 = time.perf_counter()
    assert w.flush(0.5) is False
    assert time.perf_counter() - t0 < 2.5
    blocker.rollback()
    assert w.flush(10)
    w.close()


def test_read_only_open_never_migrates(tmp_path):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    conn.execute("INSERT INTO _migrations VALUES ('m001_initial', 'x')")
    conn.commit()
    conn.close()
    ro, pending = open_read(path)
    assert "m005_ledger_durability" in pending and "m001_initial" not in pending
    ro.close()
    assert sqlite3.connect(path).execute("SELECT COUNT(*) FROM _migrations").fetchone()[0] == 1


def test_disk_full_rows_wait_then_land_when_space_is_freed(tmp_path):
    from tests.fakes.small_fs import fill, free, small_tmpfs

    with small_tmpfs(tmp_path / "fs", "2m") as fs:
        path = fs / "l.sqlite"
        w = LedgerWriter(path, spill_dir=tmp_path / "spill")
        w.put("stage_calls", row(0))
        assert w.flush(5)
        filler = fill(fs)
        big = "x" * 4000  # rows that need new pages
        t0 = time.perf_counter()
        for i in range(1, 200):
            w.put("stage_calls", row(i, error=big))
        assert time.perf_counter() - t0 < 1.0
        t0 = time.perf_counter()
        assert w.flush(5) is False
        assert time.perf_counter() - t0 < 2.0  # a failing ledger answers at once: queries never wait on it
        deadline = time.time() + 10
        while w.health()["status"] != "degraded" and time.time() < deadline:
            time.sleep(0.05)
        h = w.health()
        assert h["status"] == "degraded" and "full" in h["last_error"]
        assert h["buffered_rows"] > 0 and h["oldest_buffered_age_s"] > 0
        free(filler)
        deadline = time.time() + 15
        while not w.flush(0.2) and time.time() < deadline:
            time.sleep(0.1)
        assert w.health()["status"] == "ok" and w.health()["buffered_rows"] == 0
        w.close()
        assert count(path) == 200 and w.lost == 0 and w.spilled == 0


def test_shutdown_while_failing_spills_elsewhere_and_records_the_loss_count_later(tmp_path):
    from tests.fakes.small_fs import fill, free, small_tmpfs

    with small_tmpfs(tmp_path / "fs", "2m") as fs:
        path = fs / "l.sqlite"
        w = LedgerWriter(path, spill_dir=tmp_path / "spill", max_buffer=50)
        filler = fill(fs)
        for i in range(80):  # 50 buffered, 30 past the bound
            w.put("stage_calls", row(i, error="x" * 4000))
        w.close(timeout_s=2)
        # the ledger's folder is full: the spill went to the spill dir, nothing was lost
        assert w.lost == 0 and w.spilled >= 30 and w.spilled + w.written == 80
        spill = tmp_path / "spill"
        assert sum(len(p.read_text().splitlines()) for p in spill.iterdir()) >= w.spilled
        free(filler)
        w2 = LedgerWriter(path, spill_dir=spill)
        assert w2.flush(10)
        w2.close()
        conn = sqlite3.connect(path)
        assert conn.execute("SELECT COUNT(*) FROM stage_calls").fetchone()[0] == 80
        kinds = dict(conn.execute("SELECT kind, SUM(rows) FROM ledger_losses GROUP BY kind").fetchall())
        assert kinds["spilled"] == w.spilled and kinds["replayed"] == w.spilled


def test_rows_that_cannot_be_kept_anywhere_are_counted_and_the_count_lands_later(tmp_path):
    from tests.fakes.small_fs import fill, free, small_tmpfs

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the spill dir should be")
    with small_tmpfs(tmp_path / "fs", "2m") as fs:
        path = fs / "l.sqlite"
        w = LedgerWriter(path, spill_dir=blocker / "spill", max_buffer=10)
        filler = fill(fs)  # the ledger's folder is full, the spill dir cannot be created
        for i in range(25):
            w.put("stage_calls", row(i, error="x" * 4000))
        assert w.lost >= 1 and w.health()["status"] == "degraded" and w.health()["lost_rows"] == w.lost
        free(filler)
        deadline = time.time() + 15
        while not w.flush(0.2) and time.time() < deadline:
            time.sleep(0.1)
        w.close()
        conn = sqlite3.connect(path)
        lost = conn.execute("SELECT SUM(rows) FROM ledger_losses WHERE kind = 'lost'").fetchone()[0]
        kept = conn.execute("SELECT COUNT(*) FROM stage_calls").fetchone()[0]
        conn.close()
    assert lost == w.lost and kept + w.lost == 25
