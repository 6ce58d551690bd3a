"""The ledger (a SQLite file, or PostgreSQL by RAG_LEDGER_URL: see tracing/db.py) and its background writer.

The tracer must never slow or break a query, so it hands rows to `LedgerWriter.put()`, which only
appends to a bounded in-memory buffer (a lock held for microseconds, never for I/O). One writer
thread owns its own connection, writes batches in one transaction each, and never dies:

- a row SQLite rejects (bad type, constraint, unknown column) is moved to `ledger_quarantine` with
  its error, and the rest of the batch is written;
- when the ledger cannot be written (disk full, read-only, locked, I/O error) the batch stays in the
  buffer and is retried with back-off until the disk accepts it; `health()` (and `/healthz`) says
  so, with the buffer's size and its oldest row's age;
- past the buffer's bound, and at shutdown while still failing, rows go to a spill file (beside the
  ledger, else under the spill dir, by default the system temp dir), replayed into the ledger by the
  next writer on that ledger; a row that cannot be kept anywhere is counted as lost. Spilled, lost and
  replayed counts are themselves written to `ledger_losses` as soon as the ledger accepts writes.

`write_now()` is the one synchronous path: a small committed insert with a short busy timeout, used
for the `started` row of an LLM attempt so it is on disk before the request leaves. If it cannot
commit in time the row falls back to the buffer; the query never waits longer than that timeout.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import sqlite3
import tempfile
import threading
import time
from collections import deque
from datetime import datetime, timezone
from functools import lru_cache
from itertools import groupby, islice
from pathlib import Path

from tracing import rollups
from tracing.db import (LedgerURLError, as_target, connect_pg, dialect, pg_is_config_error,
                        pg_is_transient, redact)
from tracing.migrations import migrate, pending

log = logging.getLogger(__name__)
TABLES = {"queries", "stage_calls", "shadow_pairs", "ledger_losses"}
# SQLite result codes that mean "the ledger cannot take writes right now", not "this row is bad".
TRANSIENT = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_FULL", "SQLITE_READONLY", "SQLITE_IOERR",
             "SQLITE_CANTOPEN", "SQLITE_PROTOCOL", "SQLITE_NOMEM", "SQLITE_NOTADB")
_TRANSIENT_TEXT = ("locked", "disk is full", "readonly", "disk i/o", "unable to open", "not a database")


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def is_transient(e: BaseException) -> bool:
    pg = pg_is_transient(e)  # connection lost/refused, admin shutdown, disk full, read-only: retry
    if pg is not None:
        return pg
    if not isinstance(e, sqlite3.Error):
        return isinstance(e, OSError)
    name = getattr(e, "sqlite_errorname", None) or ""
    if name:
        return name.startswith(TRANSIENT)
    return isinstance(e, sqlite3.OperationalError) and any(t in str(e).lower() for t in _TRANSIENT_TEXT)


def connect(where, *, statement_timeout_s: float | None = None):
    """A read-write connection to a migrated ledger (migrations run here when pending).

    `where`: a LedgerTarget, a RAG_LEDGER_URL string, or a SQLite file path."""
    target = as_target(where)
    if target.dialect == "postgresql":
        try:
            conn = connect_pg(target.url, timeout_s=10, statement_timeout_s=statement_timeout_s)
        except Exception as e:
            if pg_is_config_error(e):  # retrying will not help: say what to fix
                raise LedgerURLError(f"RAG_LEDGER_URL={target.display}: cannot connect ({type(e).__name__}: "
                                     f"{_redacted_error(e)}); check the user, password, host and "
                                     "database name") from None
            raise
        try:
            migrate(conn)
        except BaseException as e:
            conn.close()
            if getattr(e, "sqlstate", None) == "42501":  # insufficient_privilege: no retry fixes it
                raise LedgerURLError(f"RAG_LEDGER_URL={target.display}: the user cannot create the ledger's tables "
                                     f"({_redacted_error(e)}); make it the database's owner "
                                     "(createdb -O USER DB, or ALTER DATABASE DB OWNER TO USER)") from None
            raise
        return conn
    path = target.path
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30, check_same_thread=True)
    conn.row_factory = sqlite3.Row
    if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    migrate(conn)
    return conn


def _redacted_error(e: BaseException) -> str:
    # libpq's messages name host, port, user and database, not the password; redact any URL anyway
    return redact(str(e).strip().replace("\n", " "))


def open_read(where) -> tuple[sqlite3.Connection, list[str]]:
    """A read-only connection that never migrates, and the migrations still pending on it.

    Works on a ledger whose file or folder is read-only: when SQLite cannot create the WAL's
    shared-memory file there, the file is opened as immutable (nobody can be writing it)."""
    target = as_target(where)
    if target.dialect == "postgresql":
        conn = connect_pg(target.url, timeout_s=10)
        return conn, pending(conn)
    path = target.path.resolve()
    last: Exception | None = None
    for query in ("mode=ro", "mode=ro&immutable=1"):
        try:
            conn = sqlite3.connect(f"{path.as_uri()}?{query}", uri=True, timeout=10, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            return conn, pending(conn)
        except sqlite3.Error as e:
            last = e
    raise last  # type: ignore[misc]


def read_connection(where) -> tuple[sqlite3.Connection, list[str]]:
    """Read-write (migrated) when the ledger accepts writes, else read-only with pending migrations."""
    target = as_target(where)
    if target.dialect == "postgresql":  # a server either answers or it does not: no read-only fallback
        return connect(target), []
    path = target.path
    try:
        return connect(path), []
    except sqlite3.Error as e:
        if not is_transient(e):
            raise
        log.warning("ledger %s not writable (%s); reading it read-only", path, e)
    conn, pending_names = open_read(path)
    if pending_names:
        # Readers expect today's schema: migrate a copy in memory and leave the file untouched.
        # (Memory grows with the ledger; this path only serves an old ledger on read-only media.)
        copy = sqlite3.connect(":memory:", check_same_thread=False)
        conn.backup(copy)
        conn.close()
        copy.row_factory = sqlite3.Row
        migrate(copy)
        conn = copy
    return conn, pending_names


def _insert(conn: sqlite3.Connection, table: str, row: dict) -> None:
    _check_row(row)
    conn.execute(_insert_sql(table, tuple(row), bool(row.get("attempt_id"))), list(row.values()))


def _check_row(row) -> None:
    if not isinstance(row, dict) or not row:
        raise TypeError(f"a ledger row must be a non-empty dict, got {type(row).__name__}")


@lru_cache(maxsize=256)
def _insert_sql(table: str, cols: tuple[str, ...], has_attempt_id: bool) -> str:
    names = ",".join(cols)
    marks = ",".join("?" * len(cols))
    if table == "stage_calls" and has_attempt_id:
        # an LLM attempt: its final row replaces the `started` row written before the request left
        updates = ",".join(f"{c}=excluded.{c}" for c in cols if c != "attempt_id")
        return (f"INSERT INTO stage_calls ({names}) VALUES ({marks}) "
                f"ON CONFLICT(attempt_id) DO UPDATE SET {updates}")
    verb = "INSERT" if table in ("stage_calls", "ledger_losses") else "INSERT OR REPLACE"
    return f"{verb} INTO {table} ({names}) VALUES ({marks})"


def _rollback_quietly(conn) -> None:
    """Undo an open batch; a connection that is itself gone has had its transaction ended by the server."""
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    except Exception:
        pass


def default_spill_dir() -> Path:
    return Path(tempfile.gettempdir()) / "rag-ledger-spill"


class LedgerWriter:
    def __init__(self, path, *, max_buffer: int = 10_000, batch: int = 200,
                 spill_dir: Path | None = None, direct_timeout_s: float = 1.0):
        """`path`: a LedgerTarget, a RAG_LEDGER_URL string, or a SQLite file path."""
        self.target = as_target(path)
        self.path = self.target.path  # the SQLite file; None on PostgreSQL
        self.max_buffer = max_buffer
        self._batch = batch
        self.direct_timeout_s = direct_timeout_s
        spill_dir = Path(spill_dir or default_spill_dir())
        if self.path is not None:
            key = hashlib.sha1(str(self.path.resolve()).encode()).hexdigest()[:12]
            self.spill_paths = [self.path.with_suffix(".unwritten.jsonl"), spill_dir / f"{self.path.stem}-{key}.jsonl"]
        else:  # no file to sit beside: every replica on this machine spills (and replays) here
            self.spill_paths = [spill_dir / f"postgresql-{self.target.key}.jsonl"]
        self._buf: deque[tuple[str, dict, float]] = deque()
        self._cv = threading.Condition()
        self._busy = False  # the thread holds a batch it has not committed yet
        self._stop = threading.Event()
        self._unrecorded: list[dict] = []  # loss accounting not yet in ledger_losses
        self._spill_lock = threading.Lock()
        self._direct = threading.local()
        self._direct_conns: list[sqlite3.Connection] = []
        self.failing: str | None = None
        self.failing_since: float | None = None
        self.written = self.quarantined = self.spilled = self.lost = self.replayed = 0
        self.failed_batches = 0
        try:
            connect(self.target).close()  # migrate up front, in the caller's thread: a broken file fails here
        except Exception as e:
            if not is_transient(e):
                raise
            self._set_failing(e)  # disk full / read-only / server down: start degraded, the thread retries
            log.error("ledger %s not writable at start (%s); rows wait in memory", self.target, e)
        self._to_replay = self._claim_spills()
        self._thread = threading.Thread(target=self._run, name="ledger-writer", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    # -- the query side: never blocks on I/O ----------------------------------------------------
    def put(self, table: str, row: dict) -> None:
        if table not in TABLES:
            raise ValueError(f"unknown ledger table {table!r}")
        with self._cv:
            if not self._stop.is_set() and len(self._buf) < self.max_buffer:
                self._buf.append((table, row, time.monotonic()))
                self._cv.notify_all()
                return
        self._spill([(table, row)], "ledger buffer full" if not self._stop.is_set() else "writer closed")

    def write_now(self, table: str, row: dict) -> bool:
        """Commit one row before returning (bounded by `direct_timeout_s`); else buffer it. True if committed."""
        if self.failing is None and not self._stop.is_set():
            try:
                conn = getattr(self._direct, "conn", None)
                if conn is None:
                    conn = self._direct_connect()
                    self._direct.conn = conn
                    with self._cv:
                        self._direct_conns.append(conn)
                conn.execute("BEGIN IMMEDIATE")
                try:  # the row and its report totals commit together
                    _insert(conn, table, row)
                    rollups.refresh(conn, rollups.affected([(table, row)]))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                with self._cv:
                    self.written += 1
                return True
            except Exception as e:  # full, read-only, locked past the timeout, bad row: the buffer copes
                log.warning("direct ledger write failed (%s); buffering the row", e)
                if self.target.dialect == "postgresql":  # a lost server connection stays lost: open anew next time
                    self._drop_direct()
        self.put(table, row)
        return False

    def _direct_connect(self):
        if self.target.dialect == "postgresql":
            conn = connect_pg(self.target.url, timeout_s=self.direct_timeout_s,
                              statement_timeout_s=self.direct_timeout_s, application_name="rag-ledger-direct")
        else:
            conn = sqlite3.connect(self.path, timeout=self.direct_timeout_s, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.isolation_level = None
        return conn

    def _drop_direct(self) -> None:
        conn = getattr(self._direct, "conn", None)
        self._direct.conn = None
        if conn is None:
            return
        with self._cv:
            if conn in self._direct_conns:
                self._direct_conns.remove(conn)
        try:
            conn.close()
        except Exception:
            pass

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every accepted row is committed; returns False at once while the ledger is
        failing (rows stay buffered) and after `timeout_s` at most."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while self._buf or self._busy or self._unrecorded or self._to_replay:
                left = deadline - time.monotonic()
                if self.failing is not None or left <= 0 or not self._thread.is_alive():
                    return False
                self._cv.wait(min(left, 0.1))
            return True

    def pending_rows(self, query_id: str) -> list[tuple[str, dict]]:
        """Rows of one query still waiting in memory (shown by the service while the disk is failing)."""
        with self._cv:
            return [(t, r) for t, r, _ in self._buf if isinstance(r, dict) and r.get("query_id") == query_id]

    def health(self) -> dict:
        with self._cv:
            oldest = time.monotonic() - self._buf[0][2] if self._buf else 0.0
            buffered = len(self._buf)
        alive = self._thread.is_alive() or self._stop.is_set()
        degraded = self.failing is not None or not alive or self.lost > 0 or self.spilled > self.replayed
        return {"status": "degraded" if degraded else "ok", "writer_alive": alive,
                "buffered_rows": buffered, "buffer_limit": self.max_buffer,
                "oldest_buffered_age_s": round(oldest, 3), "written_rows": self.written,
                "quarantined_rows": self.quarantined, "spilled_rows": self.spilled, "lost_rows": self.lost,
                "replayed_rows": self.replayed, "last_error": self.failing,
                "failing_for_s": round(time.monotonic() - self.failing_since, 3) if self.failing_since else 0.0,
                "spill_files": [str(p) for p in self.spill_paths if p.exists()]}

    def close(self, timeout_s: float = 10.0) -> None:
        if self._stop.is_set():
            return
        self.flush(timeout_s)
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
        self._thread.join(timeout=timeout_s)
        with self._cv:
            rest = [(t, r) for t, r, _ in self._buf]
            self._buf.clear()
            for ev in self._unrecorded:  # keep the accounting with the rows it describes
                rest.append(("ledger_losses", ev))
            self._unrecorded = []
        if rest:
            self._spill(rest, f"shutdown while the ledger fails: {self.failing}")
        for path, taking in self._to_replay:  # never replayed (ledger failing all along): hand them back
            try:
                with taking.open(encoding="utf-8") as src, path.open("a", encoding="utf-8") as dst:
                    dst.write(src.read())
                taking.unlink()
            except OSError as e:
                log.error("spill file %s left as %s (%s)", path, taking, e)
        with self._cv:
            conns, self._direct_conns = self._direct_conns, []
        for c in conns:
            try:
                c.close()
            except Exception:
                pass

    # -- spill and accounting -------------------------------------------------------------------
    def _spill(self, rows: list[tuple[str, dict]], reason: str) -> None:
        body = "".join(json.dumps({"table": t, "row": r}, ensure_ascii=False, default=repr) + "\n" for t, r in rows)
        n = sum(t != "ledger_losses" for t, _ in rows)
        with self._spill_lock:
            for path in self.spill_paths:
                data = body
                if self._stop.is_set() and n:  # no later batch will record it: the file carries its own count
                    data += json.dumps({"table": "ledger_losses", "row": {
                        "kind": "spilled", "rows": n, "reason": reason[:500], "spill_path": str(path),
                        "recorded_at": utcnow()}}, ensure_ascii=False) + "\n"
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with path.open("a", encoding="utf-8") as f:
                        f.write(data)
                        f.flush()
                        os.fsync(f.fileno())
                except OSError as e:
                    log.warning("cannot spill ledger rows to %s (%s)", path, e)
                    continue
                self._account("spilled", n, reason, str(path))
                if self.spilled - n == 0 or len(rows) > 1:  # first spill and bulk spills; not every row
                    log.error("ledger rows kept in %s for replay (%s); %d so far", path, reason, self.spilled)
                return
        self._account("lost", n, reason, None)
        log.critical("%d ledger rows LOST: no spill file writable (%s)", n, reason)

    def _account(self, kind: str, n: int, reason: str, spill_path: str | None) -> None:
        if n <= 0:
            return
        with self._cv:
            setattr(self, kind, getattr(self, kind) + n)
            if not self._stop.is_set():
                last = self._unrecorded[-1] if self._unrecorded else None
                if last and (last["kind"], last["reason"], last["spill_path"]) == (kind, reason[:500], spill_path):
                    last["rows"] += n  # one accounting row per burst, not per row
                else:
                    self._unrecorded.append({"kind": kind, "rows": n, "reason": reason[:500],
                                             "spill_path": spill_path, "recorded_at": utcnow()})
                self._cv.notify_all()

    def _set_failing(self, e: BaseException) -> None:
        with self._cv:
            if self.failing is None:
                self.failing_since = time.monotonic()
            self.failing = f"{type(e).__name__}: {e}"
            self._cv.notify_all()

    # -- the writer thread ----------------------------------------------------------------------
    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        backoff = 0.05
        while True:
            with self._cv:
                # while failing, probe the ledger even with nothing to write, so health recovers
                while not (self._buf or self._unrecorded or self._to_replay or self._stop.is_set() or self.failing):
                    self._cv.wait(0.5)
                if self._stop.is_set() and (not (self._buf or self._unrecorded) or self.failing):
                    break
                rows = [(t, r) for t, r, _ in islice(self._buf, self._batch)]
                events, self._unrecorded = self._unrecorded, []
                self._busy = True
            try:
                if conn is None:
                    conn = connect(self.target, statement_timeout_s=60)
                    conn.isolation_level = None
                    self._replay_spills(conn)
                quarantined = self._write(conn, rows, events)
            except Exception as e:  # never let the thread die: keep the rows, say so, retry
                with self._cv:
                    self._unrecorded[:0] = events
                    self._busy = False
                self.failed_batches += 1
                self._set_failing(e)
                if not is_transient(e):
                    log.exception("ledger writer fault (rows kept, retrying)")
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:
                        pass
                    conn = None
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            backoff = 0.05
            with self._cv:
                for _ in rows:
                    self._buf.popleft()
                self.written += len(rows) - quarantined
                self.quarantined += quarantined
                self.failing = self.failing_since = None
                self._busy = False
                self._cv.notify_all()
        if conn is not None:
            conn.close()

    def _write(self, conn: sqlite3.Connection, rows: list[tuple[str, dict]], events: list[dict]) -> int:
        """One transaction: every row, or its quarantine record; the loss accounting. Returns the
        number quarantined. A transient error rolls the whole batch back (it stays buffered)."""
        if rows and dialect(conn) == "postgresql":
            try:
                return self._write_pipelined(conn, rows, events)
            except Exception as e:
                if is_transient(e):
                    raise
                # some row is bad: write the batch again row by row below, quarantining just that one
        quarantined = 0
        conn.execute("BEGIN IMMEDIATE")
        try:
            for table, row in rows:
                conn.execute("SAVEPOINT one_row")
                try:
                    _insert(conn, table, row)
                except Exception as e:
                    if is_transient(e):
                        raise
                    conn.execute("ROLLBACK TO one_row")
                    conn.execute("INSERT INTO ledger_quarantine (target_table, row_json, error, quarantined_at) "
                                 "VALUES (?, ?, ?, ?)", (table, json.dumps(row, ensure_ascii=False, default=repr),
                                                          f"{type(e).__name__}: {e}"[:1000], utcnow()))
                    quarantined += 1
                    log.error("ledger row for %s quarantined: %s", table, e)
                conn.execute("RELEASE one_row")
            for ev in events:
                _insert(conn, "ledger_losses", ev)
            rollups.after_write(conn, rows, is_transient)  # report totals of these queries, same transaction
            conn.execute("COMMIT")
        except BaseException:
            _rollback_quietly(conn)
            raise
        return quarantined

    @staticmethod
    def _write_pipelined(conn, rows: list[tuple[str, dict]], events: list[dict]) -> int:
        """PostgreSQL's fast path: the whole batch in one transaction, sent as a pipeline (one network
        round trip, not three per row); any error rolls it all back and raises."""
        batch = [*rows, *(("ledger_losses", ev) for ev in events)]
        for _, row in batch:
            _check_row(row)
        conn.execute("BEGIN")
        try:
            with conn.raw.pipeline():
                # runs of rows with the same shape go as one executemany, in order (an attempt's
                # `started` row and its final row may share a batch)
                for key, run in groupby(batch, key=lambda tr: (tr[0], tuple(tr[1]), bool(tr[1].get("attempt_id")))):
                    conn.executemany(_insert_sql(*key), [list(r.values()) for _, r in run])
            rollups.after_write(conn, rows, is_transient)  # report totals of these queries, same transaction
            conn.execute("COMMIT")
        except BaseException:
            _rollback_quietly(conn)
            raise
        return 0

    def _claim_spills(self) -> list[tuple[Path, Path]]:
        """Spill files earlier writers left: renamed now, so rows this writer spills stay apart."""
        claimed = []
        for path in self.spill_paths:
            if path.exists():
                taking = path.with_name(f"{path.name}.replaying-{os.getpid()}-{id(self)}")
                try:
                    path.rename(taking)
                    claimed.append((path, taking))
                except OSError as e:
                    log.warning("cannot claim spill file %s (%s)", path, e)
        return claimed

    def _replay_spills(self, conn: sqlite3.Connection) -> None:
        """Rows an earlier writer on this ledger spilled go in now, in one transaction, then the file goes."""
        while self._to_replay:
            path, taking = self._to_replay[0]
            lines = taking.read_text(encoding="utf-8").splitlines()
            rows: list[tuple[str, dict]] = []
            for line in lines:
                try:
                    rec = json.loads(line)
                    rows.append((rec["table"] if rec["table"] in TABLES else "invalid", rec["row"]))
                except (ValueError, KeyError, TypeError) as e:
                    rows.append(("spill_line", {"line": line[:2000], "parse_error": str(e)}))
            n = sum(t != "ledger_losses" for t, _ in rows)
            q = self._write(conn, rows, [{"kind": "replayed", "rows": n, "reason": "spill file replayed at start",
                                          "spill_path": str(path), "recorded_at": utcnow()}])
            taking.unlink()
            self._to_replay.pop(0)
            with self._cv:
                self.replayed += n
                self.quarantined += q
                self.written += len(rows) - q
            log.warning("replayed %d ledger rows from %s", n, path)
