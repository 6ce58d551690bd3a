"""The writer never dies, never blocks a query, and accounts for every row it could not write."""
from __future__ import annotations

import json
import sqlite3
import time

from tracing.ledger import Ledger, LedgerWriter


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
    for i in range(500):
        w.put("stage_calls", row(i))  # past the bound: spilled, never waiting for the ledger
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
    blocker = sqlite3.connect(tmp_path / "l.sqlite", timeout=10)  # waits out the writer's own start-up write
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    w.put("stage_calls", row(1))
    t0 = time.perf_counter()
    assert w.flush(0.5) is False
    assert time.perf_counter() - t0 < 4.0  # 0.5 s asked; the margin holds at load 20
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
    with Ledger.open_read(path) as ro:
        assert "m005_ledger_durability" in ro.pending and "m001_initial" not in ro.pending
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
        c0 = time.process_time()
        for i in range(1, 200):
            w.put("stage_calls", row(i, error=big))
        assert time.process_time() - c0 < 1.0  # put() does no I/O: CPU time is the honest bound on a busy machine
        t0 = time.perf_counter()
        assert w.flush(5) is False
        # a failing ledger answers at once, not after the 5 s timeout: queries never wait on it (the margin
        # holds on a machine at load 20)
        assert time.perf_counter() - t0 < 4.0
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


# -- spill files cannot run SQL, follow links, or come from the future (issue 18) -------------------------
PLANTED_KEY = ("query_id, kind, status, started_at, question) SELECT 'planted', 'query', 'ok', 't', "
               "'sqlite ' || sqlite_version() WHERE ? IS NOT NULL --")


def spill_file(folder, ledger_path, lines):
    from tracing.ledger.writer import LedgerWriter as W

    folder.mkdir(mode=0o700, exist_ok=True)
    probe = W.__new__(W)  # the name a writer of this ledger gives its spill file
    from rag_app.config.ledger_location import as_target
    from tracing.ledger.spill import SUFFIX
    name = f"ledger-{as_target(ledger_path).key}{SUFFIX}"
    del probe
    (folder / name).write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return folder / name


def test_a_planted_spill_line_is_quarantined_never_run(tmp_path):
    path, spill = tmp_path / "l.sqlite", tmp_path / "spill"
    spill_file(spill, path, [
        {"v": 9, "table": "queries", "row": {PLANTED_KEY: "x"}},
        {"v": 9, "table": "queries", "row": {"query_id": "good", "kind": "query", "status": "ok", "started_at": "t"}},
        {"v": 99, "table": "stage_calls", "row": row(1)},  # a future schema
        {"v": 9, "table": "sqlite_master", "row": {"name": "x"}},  # not a ledger table
        "not even an object"])
    w = LedgerWriter(path, spill_dir=spill)
    deadline = time.time() + 20
    while w.health()["replay_pending_bytes"] and time.time() < deadline:
        time.sleep(0.05)
    w.close()
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT query_id FROM queries")] == ["good"]
    errors = [r[0] for r in conn.execute("SELECT error FROM ledger_quarantine ORDER BY id")]
    assert len(errors) == 4 and "not columns of queries" in errors[0] and "newer ledger schema" in errors[1]
    assert "unknown table" in errors[2] and "not a spill record" in errors[3]
    assert not any(spill.iterdir())  # the file is gone once replayed


def test_a_link_in_place_of_the_spill_file_is_not_followed(tmp_path):
    path, spill = tmp_path / "l.sqlite", tmp_path / "spill"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    w = LedgerWriter(path, spill_dir=spill, max_buffer=1)
    w.spill_path.symlink_to(victim)  # someone links the spill file's name to a file of yours
    w._stop.set()  # no thread may drain: every put spills
    w.put("stage_calls", row(1))
    w.put("stage_calls", row(2))
    assert victim.read_text() == "keep me" and w.lost == 2  # refused, counted, never written through the link
    w._stop.clear()
    w.close()


def test_a_spill_folder_others_can_write_is_made_private(tmp_path):
    import os
    import stat

    spill = tmp_path / "spill"
    spill.mkdir(mode=0o777)
    os.chmod(spill, 0o777)
    w = LedgerWriter(tmp_path / "l.sqlite", spill_dir=spill)
    w.close()
    assert stat.S_IMODE(os.stat(spill).st_mode) == 0o700


def test_a_replay_killed_midway_resumes_where_it_stopped(tmp_path):
    """Each chunk of a replay commits with how far the file was read: a writer killed between chunks is
    resumed by the next one, and every row is in the ledger once."""
    import multiprocessing as mp

    from tracing.ledger import writer as writer_mod

    path, spill = tmp_path / "l.sqlite", tmp_path / "spill"
    LedgerWriter(path, spill_dir=spill).close()  # migrated
    n = 2500
    spill_file(spill, path, [{"v": 9, "table": "stage_calls", "row": row(i)} for i in range(n)])
    ctx = mp.get_context("fork")
    proc = ctx.Process(target=_replay_one_chunk_then_die, args=(str(path), str(spill)))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 9  # killed itself after its first chunk committed
    conn = sqlite3.connect(path)
    first = conn.execute("SELECT COUNT(*) FROM stage_calls").fetchone()[0]
    assert first == writer_mod.REPLAY_CHUNK
    w = LedgerWriter(path, spill_dir=spill)
    deadline = time.time() + 30
    while w.health()["replay_pending_bytes"] and time.time() < deadline:
        time.sleep(0.05)
    w.close()
    ids = [r[0] for r in conn.execute("SELECT query_id FROM stage_calls")]
    assert len(ids) == n and len(set(ids)) == n  # every row once


def _replay_one_chunk_then_die(path, spill):
    import os

    from tracing.ledger import writer as writer_mod

    original = writer_mod.LedgerWriter._replay_chunk

    def once_then_exit(self):
        original(self)
        os._exit(9)  # kill -9 between two chunks
    writer_mod.LedgerWriter._replay_chunk = once_then_exit
    LedgerWriter(path, spill_dir=spill)
    time.sleep(60)
