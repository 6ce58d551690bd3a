"""The SQLite ledger and its background writer.

The tracer must never slow or break a query, so it only enqueues rows; one writer thread owns
its own connection (sqlite3 connections must not cross threads), batches inserts, and retries on
`database is locked`. Accepted rows are never dropped: the queue blocks rather than discards, and
rows that still cannot be written at shutdown go to `<ledger>.unwritten.jsonl` for replay.
"""
from __future__ import annotations

import atexit
import json
import logging
import queue
import sqlite3
import threading
import time
from pathlib import Path

from tracing.migrations import migrate

log = logging.getLogger(__name__)
TABLES = {"queries", "stage_calls", "shadow_pairs"}


def connect(path: Path) -> sqlite3.Connection:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30, check_same_thread=True)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    migrate(conn)
    return conn


def _insert(conn: sqlite3.Connection, table: str, row: dict) -> None:
    cols = ",".join(row)
    marks = ",".join("?" * len(row))
    verb = "INSERT" if table == "stage_calls" else "INSERT OR REPLACE"
    conn.execute(f"{verb} INTO {table} ({cols}) VALUES ({marks})", list(row.values()))


class LedgerWriter:
    def __init__(self, path: Path, *, max_queue: int = 10_000, batch: int = 200):
        self.path = Path(path)
        connect(self.path).close()  # migrate up front, in the caller's thread: fail loudly here
        self._q: queue.Queue = queue.Queue(maxsize=max_queue)
        self._batch = batch
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ledger-writer", daemon=True)
        self._thread.start()
        self.written = 0
        self.failed_batches = 0
        atexit.register(self.close)

    def put(self, table: str, row: dict) -> None:
        if table not in TABLES:
            raise ValueError(f"unknown ledger table {table!r}")
        self._q.put((table, row))  # blocks when full: back-pressure, never loss

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until every accepted row is committed (or given up on into the spill file)."""
        deadline = time.monotonic() + timeout_s
        while self._q.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.005)
        return not self._q.unfinished_tasks

    def close(self) -> None:
        if self._stop.is_set():
            return
        self.flush()
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        conn = connect(self.path)
        try:
            while not (self._stop.is_set() and self._q.empty()):
                try:
                    first = self._q.get(timeout=0.05)
                except queue.Empty:
                    continue
                rows = [first]
                while len(rows) < self._batch:
                    try:
                        rows.append(self._q.get_nowait())
                    except queue.Empty:
                        break
                self._write(conn, rows)
                for _ in rows:
                    self._q.task_done()
        finally:
            conn.close()

    def _write(self, conn: sqlite3.Connection, rows: list[tuple[str, dict]]) -> None:
        for attempt in range(8):
            try:
                with conn:
                    for table, row in rows:
                        _insert(conn, table, row)
                self.written += len(rows)
                return
            except sqlite3.OperationalError as e:  # locked / busy: another writer, back off
                log.warning("ledger write failed (%s), attempt %d", e, attempt + 1)
                time.sleep(min(0.05 * 2 ** attempt, 2.0))
            except sqlite3.Error as e:
                log.error("ledger rejected a batch (%s)", e)
                break
        self.failed_batches += 1
        spill = self.path.with_suffix(".unwritten.jsonl")
        with spill.open("a", encoding="utf-8") as f:
            for table, row in rows:
                f.write(json.dumps({"table": table, "row": row}, ensure_ascii=False) + "\n")
        log.error("%d ledger rows kept in %s for replay", len(rows), spill)
