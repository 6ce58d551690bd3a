"""No row stops the writer, and every spilled row lands once: on SQLite and PostgreSQL alike.

A row whose text no database can store (a lone surrogate, a NUL) is salvaged (its text replaced, its
query still counted) and the original quarantined; a batch that keeps failing for a reason a retry
will not fix is written row by row. Each writer spills to a file of its own and replays it while it
runs; two processes replaying one file commit each chunk once (compare-and-set on its position)."""
from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import HANG_S

from tracing.ledger import LedgerWriter, spill
from tracing.ledger import writer as writer_mod

POISON = "工资\ud800被拖欠\x00怎么办"


def row(i, **kw):
    return {"query_id": f"q{i}", "stage": "retrieve", "status": "ok", "started_at": "2026-11-29T00:00:00+00:00", **kw}


def query(i, **kw):
    return {"query_id": f"q{i}", "kind": "query", "status": "ok", "started_at": "2026-11-29T00:00:00+00:00", **kw}


def rows_of(url, sql):
    eng = create_engine(url)
    try:
        with eng.connect() as c:
            return [tuple(r) for r in c.execute(text(sql))]
    finally:
        eng.dispose()


def wait_until(cond, timeout=HANG_S):
    """Poll until `cond()`; the bound is the suite's hang limit, not a speed target (at load 7 on 2 cores
    two replicas replaying 600 spilled rows took longer than the 30 s this once allowed)."""
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.05)
    return cond()


def test_a_row_no_database_can_store_is_salvaged_and_later_rows_land(ledger_url, tmp_path):
    w = LedgerWriter(ledger_url, spill_dir=tmp_path / "spill")
    w.put("queries", query(1, question=POISON))
    w.put("stage_calls", row(1, error=POISON))
    for i in range(2, 30):
        w.put("queries", query(i, question=f"问题 {i}"))
    assert w.flush(15), w.health()
    h = w.health()
    assert h["status"] == "ok" and h["writer_alive"] and h["salvaged_rows"] == 2 and h["written_rows"] == 30
    w.put("stage_calls", row(99))  # and the writer goes on writing
    assert w.flush(10)
    w.close()
    questions = dict(rows_of(ledger_url, "SELECT query_id, question FROM queries"))
    assert len(questions) == 29 and questions["q1"] == "工资\ufffd被拖欠怎么办"
    assert rows_of(ledger_url, "SELECT error FROM stage_calls WHERE query_id = 'q1'") == [("工资\ufffd被拖欠怎么办",)]
    kept = rows_of(ledger_url, "SELECT target_table, row_json, error FROM ledger_quarantine ORDER BY id")
    assert [k[0] for k in kept] == ["queries", "stage_calls"] and all("salvaged" in k[2] for k in kept)
    assert json.loads(kept[0][1])["question"] == POISON  # the original, exactly, as ASCII JSON


def test_a_poison_row_spilled_at_shutdown_is_written_and_replayed(ledger_url, tmp_path):
    w = LedgerWriter(ledger_url, spill_dir=tmp_path / "spill", max_buffer=1)
    w._stop.set()  # nothing drains: every row goes to the spill file, as at shutdown
    w.put("queries", query(1, question=POISON))
    w.put("queries", query(2, question="fine"))
    w._stop.clear()
    w.close()
    assert w.spilled == 2 and w.lost == 0
    w2 = LedgerWriter(ledger_url, spill_dir=tmp_path / "spill")
    assert wait_until(lambda: w2.health()["replay_pending_bytes"] == 0)
    assert w2.flush(10)
    assert w2.health()["status"] == "ok"
    w2.close()
    assert sorted(rows_of(ledger_url, "SELECT query_id, question FROM queries")) == [
        ("q1", "工资\ufffd被拖欠怎么办"), ("q2", "fine")]


def test_a_batch_that_keeps_failing_is_written_row_by_row(ledger_url, tmp_path, monkeypatch):
    """Even a row that cannot be quarantined does not hold the rows behind it: it is counted lost."""
    real = writer_mod._quarantine

    def refusing(db, table, row, error):
        if isinstance(row, dict) and row.get("query_id") == "q3":
            raise RuntimeError("quarantine refused this row too")
        real(db, table, row, error)

    monkeypatch.setattr(writer_mod, "_quarantine", refusing)
    w = LedgerWriter(ledger_url, spill_dir=tmp_path / "spill")
    w.put("stage_calls", row(1))
    w.put("stage_calls", row(3, status=None))  # NOT NULL: refused, and its quarantine refused too
    w.put("stage_calls", row(4))
    assert wait_until(lambda: w.flush(0.1)), w.health()
    w.put("stage_calls", row(5))
    assert w.flush(10)
    w.close()
    assert sorted(r[0] for r in rows_of(ledger_url, "SELECT query_id FROM stage_calls")) == ["q1", "q4", "q5"]
    lost = rows_of(ledger_url, "SELECT rows, reason FROM ledger_losses WHERE kind = 'lost'")
    assert w.lost == 1 and lost[0][0] == 1 and "quarantine" in lost[0][1]


def test_replicas_sharing_a_ledger_and_a_spill_folder_each_land_every_row_once(ledger_url, tmp_path):
    folder = tmp_path / "shared-spill"
    a = LedgerWriter(ledger_url, spill_dir=folder, max_buffer=1)
    b = LedgerWriter(ledger_url, spill_dir=folder, max_buffer=1)
    assert a.spill_path != b.spill_path  # their own files, so their own replay positions
    for w, tag in ((a, "a"), (b, "b")):
        w._stop.set()
        for i in range(300):
            w.put("stage_calls", row(f"{tag}{i}"))
        w._stop.clear()
        w.close()
    # both come back at once: every spilled row lands once, whoever replays which file
    starters = [LedgerWriter(ledger_url, spill_dir=folder) for _ in range(2)]
    assert wait_until(lambda: all(s.health()["replay_pending_bytes"] == 0 for s in starters))
    for s in starters:
        s.close()
    ids = [r[0] for r in rows_of(ledger_url, "SELECT query_id FROM stage_calls")]
    assert len(ids) == 600 and len(set(ids)) == 600
    assert not [p for p in folder.iterdir() if p.name.startswith("ledger-")]


def test_rows_spilled_while_running_are_replayed_while_running(ledger_url, tmp_path, monkeypatch):
    monkeypatch.setattr(writer_mod, "REPLAY_LOOK_S", 0.2)
    w = LedgerWriter(ledger_url, spill_dir=tmp_path / "spill", max_buffer=5, batch=5)
    for i in range(400):
        w.put("stage_calls", row(i))  # past the bound: spilled
    assert w.spilled > 0
    assert wait_until(lambda: w.replayed == w.spilled and w.health()["status"] == "ok"), w.health()
    w.close()
    assert rows_of(ledger_url, "SELECT COUNT(DISTINCT query_id), COUNT(*) FROM stage_calls") == [(400, 400)]


@pytest.mark.parametrize("started", [False, True], ids=["fresh file", "resumed file"])
def test_two_processes_replaying_one_file_commit_each_chunk_once(ledger_url, tmp_path, monkeypatch, started):
    """A lock that does not hold (a network folder): both hold the same claimed file; the position's
    compare-and-set lets one chunk commit, the other rolls back."""
    monkeypatch.setattr(writer_mod, "REPLAY_CHUNK", 50)
    folder = tmp_path / "spill"
    LedgerWriter(ledger_url, spill_dir=folder).close()
    spill.ensure_dir(folder)
    (folder / f"ledger-x{spill.SUFFIX}").write_text(
        "".join(spill.encode("stage_calls", row(i), writer_mod.SCHEMA_VERSION) for i in range(1000)), encoding="utf-8")
    both_read = threading.Barrier(2, timeout=3)

    class Racing(spill.Claim):
        """Both replayers read the same position before either commits (SQLite's writer lock may make
        the second wait instead: then the barrier times out and the race is SQLite's to refuse)."""

        def lines_from(self, offset, limit):
            got = super().lines_from(offset, limit)
            if offset == 0:
                with contextlib.suppress(threading.BrokenBarrierError):
                    both_read.wait()
            return got

    claimed = spill.claim(folder, "ledger-x")[0]
    first = Racing(claimed.path, claimed.name, claimed.handle)
    if started:  # a position already recorded (a resumed replay): the compare-and-set is an update
        eng = create_engine(ledger_url)
        with eng.begin() as c:
            c.execute(text("INSERT INTO rollup_state (name, value) VALUES (:n, '0')"), {"n": first.key})
        eng.dispose()
    twin = Racing(first.path, first.name, open(first.path, encoding="utf-8"))  # no lock: the lost one
    writers = [LedgerWriter(ledger_url, spill_dir=tmp_path / f"own{i}") for i in range(2)]
    assert all(w.flush(10) for w in writers)
    for w, c in zip(writers, (first, twin)):  # each writer's thread replays its claim, at the same time
        with w._cv:
            w._claims = [c]
            w._cv.notify_all()
    assert wait_until(lambda: not any(w._claims for w in writers))
    for w in writers:
        w.close()
    ids = [r[0] for r in rows_of(ledger_url, "SELECT query_id FROM stage_calls")]
    assert len(set(ids)) == 1000 and len(ids) == 1000


def test_a_sticky_shared_spill_folder_is_left_as_it_is(tmp_path):
    shared = tmp_path / "drop"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    w = LedgerWriter(tmp_path / "l.sqlite", spill_dir=shared, max_buffer=1)
    w._stop.set()
    w.put("stage_calls", row(1))
    w._stop.clear()
    w.close()
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o1777
    assert [stat.S_IMODE(p.stat().st_mode) for p in shared.iterdir() if p.name.startswith("ledger-")] == [0o600]


def test_shutdown_on_a_full_disk_spills_to_the_fallback_and_says_where(tmp_path, caplog):
    from tests.fakes.small_fs import fill, free, small_tmpfs

    with small_tmpfs(tmp_path / "fs", "2m") as fs:
        path, fallback = fs / "l.sqlite", tmp_path / "fallback"
        w = LedgerWriter(path, spill_dir=fs / "spill", spill_fallback_dir=fallback, max_buffer=100)
        filler = fill(fs)
        for i in range(40):
            w.put("stage_calls", row(i, error="x" * 4000))
        w.close(timeout_s=2)
        assert w.lost == 0 and w.spilled + w.written == 40 and w.spilled > 0
        assert any("fallback spill file" in r.message and str(fallback) in r.message for r in caplog.records)
        free(filler)
        w2 = LedgerWriter(path, spill_dir=fs / "spill", spill_fallback_dir=fallback)
        assert wait_until(lambda: w2.health()["replay_pending_bytes"] == 0)
        assert w2.flush(10)
        w2.close()
        assert rows_of(f"sqlite:///{path}", "SELECT COUNT(*) FROM stage_calls") == [(40,)]


def test_rows_lost_at_shutdown_on_a_full_disk_are_counted_at_the_next_start(tmp_path):
    """No spill file fits: the count goes into the writer's preallocated loss record (no new block
    needed), and the next start folds it into ledger_losses, where reports and /healthz read it."""
    from tests.fakes.small_fs import fill, free, small_tmpfs
    from tracing.ledger.loss_record import PREFIX

    with small_tmpfs(tmp_path / "fs", "2m") as fs:
        path, folder = fs / "l.sqlite", fs / "spill"
        w = LedgerWriter(path, spill_dir=folder, max_buffer=100)
        filler = fill(fs)
        for i in range(16):
            w.put("stage_calls", row(i, error="x" * 4000))
        w.close(timeout_s=2)
        assert w.lost > 0 and w.lost + w.written == 16
        records = [p for p in folder.iterdir() if p.name.startswith(PREFIX)]
        assert len(records) == 1 and str(w.lost) in records[0].read_text()
        free(filler)
        for _ in range(2):  # folded once, however often the ledger restarts
            w2 = LedgerWriter(path, spill_dir=folder)
            assert wait_until(lambda: w2.flush(0.1) and w2._connected)
            assert w2.health()["lost_rows_recorded"] == w.lost  # what /healthz shows after the restart
            w2.close()
        assert rows_of(f"sqlite:///{path}", "SELECT SUM(rows) FROM ledger_losses WHERE kind = 'lost'") == [(w.lost,)]
        assert not records[0].exists()


def test_a_writer_that_lost_nothing_leaves_no_loss_record(tmp_path):
    w = LedgerWriter(tmp_path / "l.sqlite", spill_dir=tmp_path / "spill")
    record = w._loss_record.path
    assert record.exists() and record.stat().st_size == 4096  # its blocks exist before any disk fills
    w.close()
    assert not record.exists()


@pytest.mark.parametrize("planted", ['{"events": [{"kind": "lost", "rows": "9; DROP"}]}', "not json", ""])
def test_a_planted_loss_record_adds_nothing_it_cannot_parse(tmp_path, planted):
    folder = tmp_path / "spill"
    w = LedgerWriter(tmp_path / "l.sqlite", spill_dir=folder)
    w.close()
    spill.ensure_dir(folder)
    key = Path(w.spill_path).name.split("-")[1]
    (folder / f"losses-{key}-planted.json").write_text(planted)
    LedgerWriter(tmp_path / "l.sqlite", spill_dir=folder).close()
    assert rows_of(f"sqlite:///{tmp_path / 'l.sqlite'}", "SELECT COUNT(*) FROM ledger_losses WHERE kind = 'lost'") == [(0,)]


def _replay_one_chunk_then_die(url, folder):
    def once_then_exit(self):
        writer_mod.LedgerWriter._replay_chunk_real(self)
        os._exit(9)  # kill -9 between two chunks

    writer_mod.LedgerWriter._replay_chunk_real = writer_mod.LedgerWriter._replay_chunk
    writer_mod.LedgerWriter._replay_chunk = once_then_exit
    LedgerWriter(url, spill_dir=folder)
    time.sleep(60)


def test_a_replica_killed_mid_replay_is_resumed_by_two_replicas_once(ledger_url, tmp_path):
    """Two replicas' spills in one folder; one replica is killed -9 after a chunk of a replay; then two
    replicas start at once: every row is in the ledger once, and both say ok."""
    import multiprocessing as mp

    folder = tmp_path / "shared-spill"
    for tag in ("a", "b"):
        w = LedgerWriter(ledger_url, spill_dir=folder, max_buffer=1)
        w._stop.set()
        for i in range(1500):
            w.put("stage_calls", row(f"{tag}{i}"))
        w._stop.clear()
        w.close()
    proc = mp.get_context("fork").Process(target=_replay_one_chunk_then_die, args=(ledger_url, str(folder)))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 9
    assert rows_of(ledger_url, "SELECT COUNT(*) FROM stage_calls") == [(writer_mod.REPLAY_CHUNK,)]
    starters = [LedgerWriter(ledger_url, spill_dir=folder) for _ in range(2)]
    assert wait_until(lambda: all(s.health()["replay_pending_bytes"] == 0 for s in starters))
    assert all(s.flush(10) and s.health()["status"] == "ok" for s in starters)
    for s in starters:
        s.close()
    ids = [r[0] for r in rows_of(ledger_url, "SELECT query_id FROM stage_calls")]
    assert len(ids) == 3000 and len(set(ids)) == 3000
