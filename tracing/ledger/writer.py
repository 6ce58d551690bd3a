"""The ledger writer: the tracer hands it rows, one background thread writes them in batches.

The tracer must never slow or break a query, so `put()` only appends to a bounded in-memory buffer
(a lock held for microseconds, never for I/O). One writer thread writes batches, one transaction each,
and never dies:

- a row the ledger rejects (a key that is not a column, a bad type, a constraint) is moved to
  `ledger_quarantine` with its error and the rest of the batch is written; statements are built from
  the schema's Table objects, so a row's keys can never become SQL;
- while the ledger cannot be written (disk full, read-only, locked, server down or frozen past the
  statement timeout) the batch stays buffered and is retried with back-off; `health()` says so;
- past the buffer's bound, and at shutdown while still failing, rows go to a spill file (spill.py),
  which the next writer on this ledger replays in the background, a chunk per transaction, resuming
  where a killed replay stopped; spilled, lost and replayed counts are rows of `ledger_losses`;
- each batch folds its queries into the report totals in the same transaction (rollups.py), plus a
  slice of any backlog (rows written around the writer, a migration's back-fill).

`write_now()` is the one synchronous path: a small committed insert through a small pool of direct
connections, bounded by `direct_timeout_s` (connect, pool wait, statement and lock), used for the
`started` row of an LLM attempt so it is on disk before the request leaves. If it cannot commit in time
the row falls back to the buffer: a query never waits longer than that bound.

Each writer registers itself (ledger_writers) and keeps a heartbeat; at start it marks the `started`
rows of writers that stopped beating (a process killed mid-call) `unknown`: possibly billed, at risk in
the reports' totals.
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import re
import socket
import threading
import time
import uuid
from collections import deque
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from itertools import islice
from operator import itemgetter
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    and_,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from rag_app.config import LedgerTarget, as_target
from rag_app.core import utcnow
from tracing.ledger import loss_record, rollups, spill
from tracing.ledger.engine import (
    Bounds,
    config_error,
    is_transient,
    make_engine,
    redacted_error,
)
from tracing.ledger.migrations import MIGRATIONS, migrate
from tracing.ledger.schema import (
    TABLES,
    UNKNOWN_ROWS,
    WRITABLE,
    ledger_losses,
    ledger_quarantine,
    ledger_state,
    ledger_writers,
    stage_calls,
)

log = logging.getLogger(__name__)
SCHEMA_VERSION = len(MIGRATIONS)  # what this writer's rows (and spill lines) are written for
HEARTBEAT_S = 10.0
DEAD_AFTER_S = 60.0  # a writer silent this long is gone; its `started` rows become `unknown`
ORPHAN_STARTED_AFTER_S = 600.0  # `started` rows of writers that never said who they were (0.4.0)
BACKLOG_PER_BATCH = 200  # dirty queries folded beside each batch's own
REPLAY_CHUNK = 1000  # spill lines per transaction
REPLAY_LOOK_S = 5.0  # a writer that spilled while running looks for its file this often to replay it
POISON_TRIES = 3  # a batch failing this often for a reason a retry will not fix is written row by row


def _ago(seconds: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat(timespec="milliseconds")


def default_spill_dir(target: LedgerTarget) -> Path:
    """Beside a SQLite ledger; for PostgreSQL a private folder in the user's home (the app passes
    `<RAG_DATA_DIR>/spill`). Never the shared system temp dir."""
    if target.path is not None:
        return Path(target.path).resolve().parent / "spill"
    return Path.home() / ".cache" / "legal-rag" / "spill"


# written whole: a second write (a replayed spill file) replaces the row
WHOLE_ROWS = ("queries", "shadow_pairs", "query_quality", "query_citations")


@lru_cache(maxsize=8)
def _defaults(table: str) -> dict:
    """Every column of a whole-row table but its key, with the value the schema gives it when left out."""
    out = {}
    for c in TABLES[table].columns:
        if not c.primary_key:
            default = c.server_default.arg.text if c.server_default is not None else None  # type: ignore[attr-defined]
            out[c.name] = None if default is None else int(default) if default.lstrip("-").isdigit() else default.strip("'")
    return out


def _full_row(table: str, row: dict) -> dict:
    """A queries / shadow_pairs row with every column, so writing it again replaces the whole row on both
    engines (the columns it leaves out go back to their defaults, as SQLite's INSERT OR REPLACE did)."""
    return {**_defaults(table), **row}


@lru_cache(maxsize=256)
def _built_sql(dialect: str, table: str, cols: tuple[str, ...], upsert: bool) -> tuple[str, Any]:
    """The statement compiled once by SQLAlchemy for the engine's driver, and how to turn a row into its
    parameters: SQLAlchemy still writes each dialect, but a batch goes to the driver's executemany
    without a parameter set built per row (that cost more than the insert). SQLite binds positional
    tuples (a third faster than names); psycopg takes the row dicts as they are."""
    stmt = _built_statement(dialect, table, cols, upsert)
    if dialect == "postgresql":
        return str(stmt.compile(dialect=postgresql.psycopg.dialect(), column_keys=list(cols))), None  # type: ignore[attr-defined]
    compiled = stmt.compile(dialect=sqlite.pysqlite.dialect(), column_keys=list(cols))  # type: ignore[attr-defined]
    order = [name for name in compiled.positiontup or ()]
    params = itemgetter(*order) if len(order) > 1 else (lambda row: (row[order[0]],))
    return str(compiled), params


@lru_cache(maxsize=256)
def _built_statement(dialect: str, table: str, cols: tuple[str, ...], upsert: bool):
    """One insert (or upsert) per engine, table and row shape, built once (a fresh on_conflict per batch
    cost more than the rows themselves)."""
    t = TABLES[table]
    ins = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(t).inline()  # no RETURNING id
    if table == "stage_calls" and upsert:
        # an LLM attempt: its final row replaces the `started` row written before the request left
        return ins.on_conflict_do_update(index_elements=["attempt_id"],
                                         set_={c: ins.excluded[c] for c in cols if c != "attempt_id"})
    if table in WHOLE_ROWS:
        key = [c.name for c in t.primary_key.columns]
        return ins.on_conflict_do_update(index_elements=key, set_={c: ins.excluded[c] for c in cols if c not in key})
    return ins


COPY_MIN_ROWS = 50  # PostgreSQL: plain inserts of at least this many rows of one shape go as COPY


def _copy_run(db: Connection, table: str, cols: tuple[str, ...], run: list[dict]) -> None:
    """PostgreSQL: rows of one shape that only insert, as one COPY in the batch's transaction (no
    statement per row: the writer's inserts cost more than raw `executemany`'s, which also left no time
    for the totals). `table` and `cols` are the schema's own names (insert_rows checked every key)."""
    from psycopg import sql

    stmt = sql.SQL("COPY {} ({}) FROM STDIN").format(sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, cols)))
    with db.connection.dbapi_connection.cursor() as cursor, cursor.copy(stmt) as copy:  # type: ignore[union-attr]
        for row in run:
            copy.write_row([row[c] for c in cols])


def _execute_run(db: Connection, table: str, cols: tuple[str, ...], upsert: bool, run: list[dict]) -> None:
    if (db.dialect.name == "postgresql" and not upsert and table not in WHOLE_ROWS
            and len(run) >= COPY_MIN_ROWS):
        _copy_run(db, table, cols, run)
        return
    sql, params = _built_sql(db.dialect.name, table, cols, upsert)
    db.exec_driver_sql(sql, run if params is None else list(map(params, run)))


def _check(table: str, row: Any) -> str | None:
    """Why a row cannot be written (it is then quarantined), or None."""
    if table not in WRITABLE:
        return f"unknown ledger table {str(table)[:60]!r}"
    if not isinstance(row, dict) or not row:
        return f"a ledger row must be a non-empty dict, got {type(row).__name__}"
    unknown = [k for k in row if k not in WRITABLE[table]]
    if unknown:
        return f"keys that are not columns of {table}: {', '.join(repr(k)[:80] for k in unknown[:5])}"
    return None


_UNWRITABLE = re.compile("[\ud800-\udfff]")  # lone surrogates: no encoding, no database takes them


def clean_text(s: str) -> str:
    """A string every engine takes: lone surrogates become U+FFFD, NULs (PostgreSQL refuses them) go."""
    return _UNWRITABLE.sub("\ufffd", s).replace("\x00", "")


def _salvaged(row: Any) -> dict | None:
    """The row with its text made writable, or None when cleaning would change nothing."""
    if not isinstance(row, dict):
        return None
    out = {k: clean_text(v) if isinstance(v, str) else v for k, v in row.items()}
    return out if out != row else None


def _quarantine(db: Connection, table: str, row: Any, error: str) -> None:
    """Keep a row the ledger refused, as ASCII JSON: the record itself can always be written (a lone
    surrogate or a NUL in the row is escaped, never encoded), so quarantining never fails like the row."""
    db.execute(insert(ledger_quarantine).values(
        target_table=clean_text(str(table))[:200], row_json=json.dumps(row, ensure_ascii=True, default=repr)[:100_000],
        error=clean_text(error)[:1000], quarantined_at=utcnow()))
    log.error("ledger row for %s quarantined: %s", clean_text(str(table))[:60], clean_text(error)[:300])


class BadBatch(Exception):
    """A row of the batch failed for a reason a retry will not fix: roll the transaction back and write
    the batch again with `careful=True`, which finds and quarantines that row."""


def insert_rows(db: Connection, rows: list[tuple[str, Any]], *, careful: bool = False,
                salvaged: list | None = None) -> int:
    """Every row, or its quarantine record, in the caller's transaction; returns how many were
    quarantined. Rows of one table and shape go as one executemany (on PostgreSQL plain inserts of
    COPY_MIN_ROWS or more as one COPY): `started` attempt rows first (a
    final row in the same batch must land after its `started` row), then every other shape in the
    order it first appears, each keeping its rows' order. A transient error propagates (the caller
    retries the batch). A row the database refuses raises BadBatch, unless `careful`: then each row
    goes in its own savepoint and a refused one is quarantined. (Not a savepoint around the whole
    batch: SQLite journals every page a savepoint touches, which made each batch ~1.7x slower.)
    A refused row whose text cannot be stored (a lone surrogate, a NUL) is written again with that text
    replaced (`clean_text`): its query still counts; the original goes to the quarantine beside it and
    is appended to `salvaged`."""
    runs, quarantined = _runs_of(db, rows)
    if not careful:
        try:
            for (_, table, cols, upsert), run in runs:
                _execute_run(db, table, cols, upsert, run)
            return quarantined
        except Exception as e:
            if is_transient(e):
                raise
            raise BadBatch(redacted_error(e)) from e
    for (_, table, cols, upsert), run in runs:  # some row is bad: again one by one, quarantining just that one
        for row in run:
            quarantined += _insert_one(db, table, cols, upsert, row, salvaged)
    return quarantined


def _is_ledger_row(table: Any, row: Any) -> bool:
    """A non-empty dict whose every column the named ledger table has (anything else is quarantined)."""
    columns = WRITABLE.get(table) if isinstance(table, str) else None
    return columns is not None and isinstance(row, dict) and bool(row) and row.keys() <= columns


def _runs_of(db: Connection, rows: list[tuple[str, Any]]) -> tuple[list[tuple[tuple, list[dict]]], int]:
    """Rows grouped by (`started` last?, table, columns, upsert), `started` groups first; a row that is
    no ledger row is quarantined on the way (the count is returned)."""
    groups: dict[tuple, list[dict]] = {}
    quarantined = 0
    for table, row in rows:  # one pass: the writer thread's time is the ledger's throughput
        if not _is_ledger_row(table, row):
            _quarantine(db, table, row, _check(table, row) or "not a ledger row")
            quarantined += 1
            continue
        if table in WHOLE_ROWS:
            row = _full_row(table, row)
        first = upsert = False
        if table == "stage_calls" and row.get("attempt_id") is not None:  # an LLM attempt's row
            first, upsert = row.get("status") == "started", True
        groups.setdefault((not first, table, tuple(row), upsert), []).append(row)
    return sorted(groups.items(), key=lambda kv: kv[0][0]), quarantined  # stable: `started` shapes first


def _insert_one(db: Connection, table: str, cols: tuple, upsert: bool, row: dict, salvaged: list | None) -> int:
    """One row in its own savepoint; 1 when the database refused it and it went to the quarantine."""
    one = db.begin_nested()
    try:
        _execute_run(db, table, cols, upsert, [row])
        one.commit()
        return 0
    except Exception as e:
        if is_transient(e):
            raise
        one.rollback()
        if _write_salvaged(db, table, upsert, row, e):
            if salvaged is not None:
                salvaged.append(row)
            return 0
        _quarantine(db, table, row, redacted_error(e))
        return 1


def _write_salvaged(db: Connection, table: str, upsert: bool, row: dict, error: BaseException) -> bool:
    """Write the row with its text cleaned; True when that landed (the original is quarantined beside it)."""
    clean = _salvaged(row)
    if clean is None:
        return False
    one = db.begin_nested()
    try:
        _execute_run(db, table, tuple(clean), upsert, [clean])
        one.commit()
    except Exception as e:
        if is_transient(e):
            raise
        one.rollback()
        return False
    _quarantine(db, table, row, "salvaged (unwritable text replaced, the row kept): " + redacted_error(error))
    return True


def query_ids(rows) -> set[str]:
    """The queries a batch's rows change the totals of: their own rows, and (m022) their answer's quality."""
    return {r["query_id"] for t, r in rows if t in ("queries", "stage_calls", "query_quality") and isinstance(r, dict)
            and isinstance(r.get("query_id"), str)}


class LedgerWriter:
    def __init__(self, where, *, max_buffer: int = 10_000, batch: int = 1000, spill_dir: Path | None = None,
                 spill_fallback_dir: Path | None = None, direct_timeout_s: float = 1.0,
                 statement_timeout_s: float = 30.0):
        """`where`: a LedgerTarget, a RAG_LEDGER_URL string, or a SQLite file path. `spill_fallback_dir`:
        where spill lines go when `spill_dir` cannot take them (its disk full): best on another disk."""
        self.target = as_target(where)
        self.path = self.target.path  # the SQLite file; None on PostgreSQL
        self.writer_id = uuid.uuid4().hex
        self.max_buffer = max_buffer
        self._batch = batch
        self.direct_timeout_s = direct_timeout_s
        self.spill_dir = Path(spill_dir) if spill_dir else default_spill_dir(self.target)
        # this writer's own file: replicas sharing a ledger never share a spill file or a replay position
        self._spill_prefix = f"ledger-{self.target.key}"
        own = f"{self._spill_prefix}-{self.writer_id[:12]}{spill.SUFFIX}"
        self.spill_path = self.spill_dir / own
        self.fallback_path = Path(spill_fallback_dir) / own if spill_fallback_dir else None
        self._engine = make_engine(self.target, bounds=Bounds(connect_s=10.0, statement_s=statement_timeout_s,
                                                                pool_size=1, max_overflow=0))
        self._direct = make_engine(self.target, bounds=Bounds(connect_s=direct_timeout_s, statement_s=direct_timeout_s,
                                                                pool_size=4, max_overflow=0))
        self._buf: deque[tuple[str, Any, float]] = deque()
        self._cv = threading.Condition()
        self._busy = False  # the thread holds a batch it has not committed yet
        self._stop = threading.Event()
        self._unrecorded: list[dict] = []  # loss accounting not yet in ledger_losses
        self._spill_lock = threading.Lock()
        self._claims: list[spill.Claim] = []
        self._late: list[dict] = []  # losses after close began: no batch will record them; the loss record does
        self._spills_looked = 0  # self.spilled when this writer last looked for its spill file to replay
        self._last_look = 0.0
        self._connected = False
        self._last_beat = 0.0
        self.failing: str | None = None
        self.failing_since: float | None = None
        self.written = self.quarantined = self.spilled = self.lost = self.replayed = self.salvaged = 0
        self._poison_tries = 0  # consecutive failures of one batch for a reason a retry will not fix
        self.backlog = 0  # queries whose totals wait to be folded in
        self.lost_recorded = 0  # rows ledger_losses counts lost, by any writer ever (read at start and each beat)
        self.failed_batches = 0
        try:
            migrate(self._engine)  # in the caller's thread: a broken ledger fails here
        except Exception as e:
            fix = config_error(self.target, e)
            if fix is not None:
                raise fix from None
            if not is_transient(e):
                raise
            self._set_failing(e)  # disk full / read-only / server down: start degraded, the thread retries
            log.error("ledger %s not writable at start (%s); rows wait in memory", self.target,
                      self.target.scrub(redacted_error(e)))
        self._loss_record = self._open_loss_record()
        self._claims = self._claim_spills()
        self._thread = threading.Thread(target=self._run, name="ledger-writer", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def _spill_dirs(self) -> list[Path]:
        return [self.spill_dir] + ([self.fallback_path.parent] if self.fallback_path else [])

    def _claim_spills(self) -> list[spill.Claim]:
        with self._spill_lock:  # never while this writer appends to its own file
            claims = []
            for folder in self._spill_dirs():
                claims += spill.claim(folder, self._spill_prefix)
        self._last_look, self._spills_looked = time.monotonic(), self.spilled
        return claims

    def _open_loss_record(self) -> loss_record.LossRecord | None:
        try:
            spill.ensure_dir(self.spill_dir)
        except OSError as e:
            log.warning("spill folder %s unusable: %s", self.spill_dir, e)
            return None
        return loss_record.LossRecord(self.spill_dir, self.target.key, self.writer_id)

    @property
    def replay_pending(self) -> int:
        """Bytes of spill waiting for a replay: files claimed and not replayed yet, and this writer's own."""
        own = 0
        for p in (self.spill_path, self.fallback_path):
            try:
                own += p.stat().st_size if p is not None else 0
            except OSError:
                pass
        return own + sum(c.unreplayed for c in list(self._claims))

    # -- the query side: never blocks on I/O ----------------------------------------------------
    def _stamp(self, table: str, row: Any) -> Any:
        if table == "stage_calls" and isinstance(row, dict) and row.get("status") == "started":
            return {**row, "writer_id": self.writer_id}  # whose process the attempt was in
        return row

    def put(self, table: str, row: dict) -> None:
        if table not in TABLES:
            raise ValueError(f"unknown ledger table {table!r}")
        row = self._stamp(table, row)
        with self._cv:
            if not self._stop.is_set() and len(self._buf) < self.max_buffer:
                self._buf.append((table, row, time.monotonic()))
                self._cv.notify_all()
                return
        self._spill([(table, row)], "ledger buffer full" if not self._stop.is_set() else "writer closed")

    def write_now(self, table: str, row: dict) -> bool:
        """Commit one row before returning (bounded by `direct_timeout_s`); else buffer it. True if committed."""
        row = self._stamp(table, row)
        if self.failing is None and not self._stop.is_set() and _check(table, row) is None:
            try:
                with self._direct.begin() as db:  # the row and its report totals commit together
                    insert_rows(db, [(table, row)], careful=True)
                    rollups.fold_dirty(db, query_ids([(table, row)]))
                with self._cv:
                    self.written += 1
                return True
            except Exception as e:  # full, read-only, locked or frozen past the bound, no pooled connection
                log.warning("direct ledger write failed (%s); buffering the row", self.target.scrub(redacted_error(e)))
                self._set_failing(e)  # said at once (health, answers); the next batch that lands clears it
        self.put(table, row)
        return False

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every accepted row is committed; returns False at once while the ledger is
        failing (rows stay buffered) and after `timeout_s` at most."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while self._buf or self._busy or self._unrecorded:
                left = deadline - time.monotonic()
                if self.failing is not None or left <= 0 or not self._thread.is_alive():
                    return False
                self._cv.wait(min(left, 0.1))
            return True

    def _buffer_age(self) -> tuple[float, int]:
        """(seconds the oldest buffered row has waited, rows buffered)."""
        with self._cv:
            return (time.monotonic() - self._buf[0][2] if self._buf else 0.0), len(self._buf)

    def health(self) -> dict:
        oldest, buffered = self._buffer_age()
        alive = self._thread.is_alive() or self._stop.is_set()
        waiting = buffered > 0 and oldest > 5.0
        pending = self.replay_pending
        degraded = self.failing is not None or not alive or self.lost > 0 or pending > 0 or waiting
        return {"status": "degraded" if degraded else "ok", "writer_alive": alive,
                "buffered_rows": buffered, "buffer_limit": self.max_buffer,
                "oldest_buffered_age_s": round(oldest, 3), "written_rows": self.written,
                "quarantined_rows": self.quarantined, "salvaged_rows": self.salvaged,
                "spilled_rows": self.spilled, "lost_rows": self.lost,
                "lost_rows_recorded": self.lost_recorded,  # the ledger's count, every writer, folded records too
                "replayed_rows": self.replayed, "replay_pending_bytes": pending,
                "totals_backlog_queries": self.backlog,
                "last_error": self.target.scrub(self.failing) if self.failing else None,
                "failing_for_s": round(time.monotonic() - self.failing_since, 3) if self.failing_since else 0.0,
                "spill_files": self._spill_files()}

    def _spill_files(self) -> list[str]:
        out = []
        for folder in self._spill_dirs():
            try:
                out += [p.name for p in sorted(folder.glob(f"{self._spill_prefix}*"))]
            except OSError:
                pass
        return out

    def close(self, timeout_s: float = 10.0) -> None:
        if self._stop.is_set():
            return
        self.flush(timeout_s)
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
        self._thread.join(timeout=timeout_s)
        rest = self._take_unwritten()
        if rest:
            self._spill(rest, f"shutdown while the ledger fails: {self.failing}")
        for c in self._claims:  # a replay not finished: the next writer resumes it from its recorded offset
            c.release()
        self._claims = []
        if self._loss_record is not None:  # kept only when it holds losses no ledger row records
            self._loss_record.close(keep=bool(self._late) and self._loss_record.usable)
        if self._connected:
            try:
                self._sign_off(timeout_s)
            except Exception:
                pass
        self._engine.dispose()
        self._direct.dispose()

    # -- spill and accounting -------------------------------------------------------------------
    def _take_unwritten(self) -> list[tuple[str, Any]]:
        """Every row still buffered, with the accounting events not yet recorded (kept with the rows they
        describe), off the writer: what closing spills."""
        with self._cv:
            rest = [(t, r) for t, r, _ in self._buf]
            self._buf.clear()
            rest += [("ledger_losses", ev) for ev in self._unrecorded]
            self._unrecorded = []
        return rest

    def _sign_off(self, timeout_s: float) -> None:
        """This writer's row out of ledger_writers; then the queries marked dirty by a concurrent direct
        write after our last look: fold a few batches now rather than leave the next start a backlog
        (bounded: the rest waits)."""
        with self._engine.begin() as db:
            db.execute(delete(ledger_writers).where(ledger_writers.c.writer_id == self.writer_id))
        deadline = time.monotonic() + min(timeout_s, 5.0)
        while time.monotonic() < deadline:
            with self._engine.begin() as db:
                if not (rollups.fold_dirty(db, (), BACKLOG_PER_BATCH * 5)
                        or rollups.refold_step(db, BACKLOG_PER_BATCH * 5)):
                    break

    def _spill(self, rows: list[tuple[str, Any]], reason: str) -> None:
        """Rows to this writer's spill file, or its fallback's when that fails (say a full disk); rows no
        file takes are counted lost, in the ledger later or, once closing, in the loss record."""
        n = sum(t != "ledger_losses" for t, _ in rows)
        for path in (self.spill_path, self.fallback_path):
            if path is not None and self._spill_to(path, rows, n, reason):
                return
        self._keep_late_losses(rows)
        self._account("lost", n, reason, None)
        if not n and self._stop.is_set() and self._loss_record is not None:
            self._loss_record.write(list(self._late))
        log.critical("%d ledger rows LOST: no spill file could take them (%s)%s", n, reason, self._counted_where())

    def _keep_late_losses(self, rows: list[tuple[str, Any]]) -> None:
        """Once closing, the accounting rows that rode with lost rows are gone too: keep what they said (for
        the loss record)."""
        with self._cv:
            if self._stop.is_set():
                self._late += [dict(r) for t, r in rows if t == "ledger_losses" and isinstance(r, dict)]

    def _counted_where(self) -> str:
        """Where rows lost while closing are counted (the loss record), for the log line that says they are lost."""
        if self._stop.is_set() and self._loss_record and self._loss_record.usable:
            return f"; counted in {self._loss_record.path}"
        return ""

    def _spill_to(self, path: Path, rows: list[tuple[str, Any]], n: int, reason: str) -> bool:
        """Append the rows to one spill file; False when it cannot take them (any reason at all)."""
        lines = [spill.encode(t, r, SCHEMA_VERSION) for t, r in rows]
        if self._stop.is_set() and n:  # no later batch will record it: the file carries its own count
            lines.append(spill.encode("ledger_losses", {"kind": "spilled", "rows": n, "reason": reason[:500],
                                                        "spill_path": path.name, "recorded_at": utcnow()},
                                      SCHEMA_VERSION))
        with self._spill_lock:
            try:
                spill.append(path, lines)
            except Exception as e:  # the next place, then counted lost
                log.critical("ledger spill file %s not writable (%s)", path, e)
                return False
        self._account("spilled", n, reason, path.name, late=False)
        if path != self.spill_path:
            log.error("ledger rows kept in the fallback spill file %s (%s)", path, reason)
        elif self.spilled - n == 0 or len(rows) > 1:  # first spill and bulk spills; not every row
            log.error("ledger rows kept in %s for replay (%s); %d so far", path, reason, self.spilled)
        return True

    def _account(self, kind: str, n: int, reason: str, spill_path: str | None, *, late: bool = True) -> None:
        """Count rows spilled or lost: into `ledger_losses` with the next batch, or, once closing (no
        batch left), into the loss record the next start folds in. A spill made while closing carries
        its own count in its file (`late=False`)."""
        if n <= 0:
            return
        event = {"kind": kind, "rows": n, "reason": reason[:500], "spill_path": spill_path, "recorded_at": utcnow()}
        with self._cv:
            setattr(self, kind, getattr(self, kind) + n)
            if not self._stop.is_set():
                last = self._unrecorded[-1] if self._unrecorded else None
                if last and (last["kind"], last["reason"], last["spill_path"]) == (kind, reason[:500], spill_path):
                    last["rows"] += n  # one accounting row per burst, not per row
                else:
                    self._unrecorded.append(event)
                self._cv.notify_all()
                return
            if not late:
                return
            self._late.append(event)
            late_events = list(self._late)
        if self._loss_record is not None:
            self._loss_record.write(late_events)

    def _set_failing(self, e: BaseException) -> None:
        with self._cv:
            if self.failing is None:
                self.failing_since = time.monotonic()
            self.failing = redacted_error(e)
            self._cv.notify_all()

    # -- the writer thread ----------------------------------------------------------------------
    def _has_work(self) -> bool:
        return bool(self._buf or self._unrecorded or self._claims or self.backlog or self.failing
                    or self._stop.is_set() or not self._connected)

    def _run(self) -> None:
        backoff = 0.05
        while (batch := self._next_batch()) is not None:
            rows, events = batch
            try:
                if not self._connected:
                    self._start_up()
                quarantined = self._write_batch(rows, events) if rows or events or self.failing else 0
            except Exception as e:  # never let the thread die: keep the rows, say so, retry
                if self._batch_failed(rows, events, e):
                    continue
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            backoff = 0.05
            self._batch_written(rows, quarantined)
            self._background_step()

    def _next_batch(self) -> tuple[list[tuple[str, Any]], list[dict]] | None:
        """Wait for work (or for the heartbeat, or for spilled rows to look at), then take the next batch of
        buffered rows and the accounting events not yet recorded; None: stopped with nothing left that can
        be written."""
        with self._cv:
            while not self._has_work():
                self._cv.wait(0.5)
                if self._time_to_look():
                    break
            if self._stop.is_set() and (not (self._buf or self._unrecorded) or self.failing):
                return None
            rows = [(t, r) for t, r, _ in islice(self._buf, self._batch)]
            events, self._unrecorded = self._unrecorded, []
            self._busy = True
            return rows, events

    def _time_to_look(self) -> bool:
        """The heartbeat is due, or rows were spilled since the last look and it is time to look again."""
        now = time.monotonic()
        return now - self._last_beat > HEARTBEAT_S or (
            self.spilled > self._spills_looked and now - self._last_look > REPLAY_LOOK_S)

    def _batch_failed(self, rows: list[tuple[str, Any]], events: list[dict], e: Exception) -> bool:
        """A batch's write failed: its rows stay buffered and its events unrecorded, and the fault is said.
        True: a batch no retry will fix was set aside row by row (the next one goes at once); False: wait
        and retry on a fresh connection."""
        with self._cv:
            self._unrecorded[:0] = events
            self._busy = False
        self.failed_batches += 1
        self._set_failing(e)
        if not is_transient(e):
            log.exception("ledger writer fault (rows kept, retrying)")
            self._poison_tries += 1
            if self._poison_tries >= POISON_TRIES and rows:
                self._isolate(len(rows), e)  # a batch a retry will not fix never blocks later rows
                return True
        self._engine.dispose()  # a lost server connection stays lost: open anew
        return False

    def _batch_written(self, rows: list[tuple[str, Any]], quarantined: int) -> None:
        """The batch is in the ledger: off the buffer, counted, and the writer no longer failing."""
        self._poison_tries = 0
        with self._cv:
            for _ in rows:
                self._buf.popleft()
            self.written += len(rows) - quarantined
            self.quarantined += quarantined
            self.failing = self.failing_since = None
            self._busy = False
            self._cv.notify_all()

    def _isolate(self, n: int, error: BaseException) -> None:
        """The first `n` buffered rows failed POISON_TRIES times for a reason that is not the ledger's
        state: write each in its own transaction; a row that still fails is quarantined, and a row that
        cannot even be quarantined is counted lost (with its reason). Then the buffer moves on."""
        with self._cv:
            rows = [(t, r) for t, r, _ in islice(self._buf, n)]
        log.error("a ledger batch failed %d times (%s): writing its %d rows one by one", self._poison_tries,
                  redacted_error(error), len(rows))
        done = landed = quarantined = 0
        for table, row in rows:
            try:
                q = self._write_batch_once([(table, row)], [], careful=True)
                quarantined, landed, done = quarantined + q, landed + 1 - q, done + 1
                continue
            except Exception as e:
                if is_transient(e):  # the ledger itself fails now: the rest stays buffered for the retry
                    break
                why = redacted_error(e)
            try:
                with self._engine.begin() as db:
                    _quarantine(db, table, row, why)
                quarantined += 1
            except Exception as e:
                self._account("lost", 1, f"a row neither the ledger nor its quarantine took: {redacted_error(e)}", None)
            done += 1
        with self._cv:
            for _ in range(done):
                self._buf.popleft()
            self.written += landed
            self.quarantined += quarantined
            self._cv.notify_all()
        self._poison_tries = 0

    def _write_batch(self, rows: list[tuple[str, Any]], events: list[dict]) -> int:
        try:
            return self._write_batch_once(rows, events, careful=False)
        except Exception as e:
            if is_transient(e):
                raise
            # a refused row or a failing fold rolled the batch back whole: again, guarded (a savepoint
            # per row quarantines the bad one; a failing fold is rolled back alone and marked stale)
            return self._write_batch_once(rows, events, careful=True)

    def _write_batch_once(self, rows: list[tuple[str, Any]], events: list[dict], careful: bool) -> int:
        salvaged: list = []
        with self._engine.begin() as db:
            q = insert_rows(db, rows, careful=careful, salvaged=salvaged) if rows else 0
            if events:
                db.execute(insert(ledger_losses), events)
            rollups.fold_dirty(db, query_ids(rows), BACKLOG_PER_BATCH if rows else 0, guarded=careful)
        self.salvaged += len(salvaged)
        return q

    def _time_to_replay(self) -> bool:
        """Rows were spilled since the last look, none are being replayed, the ledger takes writes, and the
        last look is old enough."""
        return (not self._claims and self.spilled > self._spills_looked and self.failing is None
                and time.monotonic() - self._last_look > REPLAY_LOOK_S)

    def _fold_backlog_slice(self) -> None:
        with self._engine.begin() as db:
            n = rollups.fold_dirty(db, (), BACKLOG_PER_BATCH * 5) or rollups.refold_step(db, BACKLOG_PER_BATCH * 5)
            self.backlog = self._backlog(db) if n else 0

    def _background_step(self) -> None:
        """Between batches: heartbeat, a chunk of spill replay, a slice of the totals backlog."""
        try:
            if time.monotonic() - self._last_beat > HEARTBEAT_S:
                self._beat()
            if self._time_to_replay():
                self._claims = self._claim_spills()  # rows spilled while running are replayed while running
            if self._claims:
                self._replay_chunk()
            elif not self._buf and self.backlog:
                self._fold_backlog_slice()
        except Exception as e:
            self._set_failing(e)
            if not is_transient(e):
                log.exception("ledger writer background step failed (retrying)")

    def _start_up(self) -> None:
        migrate(self._engine)
        now = utcnow()
        with self._engine.begin() as db:
            ins = rollups._insert(db, ledger_writers).values(
                writer_id=self.writer_id, host=socket.gethostname()[:200], pid=os.getpid(), started_at=now,
                heartbeat_at=now)
            db.execute(ins.on_conflict_do_update(index_elements=["writer_id"], set_={"heartbeat_at": now}))
            self._mark_dead_attempts(db)
            self.backlog = self._backlog(db)
            rollups.prepare(db)
        self._fold_loss_records()
        with self._engine.begin() as db:
            self.lost_recorded = self._lost_recorded(db)
        self._last_beat = time.monotonic()
        self._connected = True

    def _fold_loss_records(self) -> None:
        """Losses ended writers counted in their loss records (a full disk at shutdown) become rows of
        `ledger_losses`, each record once: its name is noted in the same transaction."""
        own = self._loss_record.path if self._loss_record is not None else None
        for rec in loss_record.left_behind(self._spill_dirs(), self.target.key, own):
            try:
                with self._engine.begin() as db:
                    if rec.events and rollups.get_state(db, rec.key) is None:
                        db.execute(insert(ledger_losses), rec.events)
                        rollups.set_state(db, rec.key, utcnow())
                        log.error("%d ledger rows lost by an ended writer, recorded in %s, are now in ledger_losses",
                                  sum(e["rows"] for e in rec.events if e["kind"] == "lost"), rec.path.name)
            except Exception:
                rec.release()
                raise
            rec.remove()

    def _beat(self) -> None:
        with self._engine.begin() as db:
            db.execute(update(ledger_writers).where(ledger_writers.c.writer_id == self.writer_id)
                       .values(heartbeat_at=utcnow()))
            self.backlog = self._backlog(db)
            self.lost_recorded = self._lost_recorded(db)
        self._last_beat = time.monotonic()

    @staticmethod
    def _lost_recorded(db: Connection) -> int:
        return int(db.execute(select(func.coalesce(func.sum(ledger_losses.c.rows), 0))
                              .where(ledger_losses.c.kind == "lost")).scalar() or 0)

    @staticmethod
    def _backlog(db: Connection) -> int:
        """Queries whose totals wait to be folded (dirty marks), 1 more while a refold is in progress."""
        return rollups.dirty_count(db) + int(rollups.refold_pending(db))

    def _mark_dead_attempts(self, db: Connection) -> int:
        """`started` rows of writers that stopped beating (killed mid-call) become `unknown`: possibly billed
        at their input estimate, counted at risk in the totals (their queries are refolded by the triggers)."""
        dead = select(ledger_writers.c.writer_id).where(ledger_writers.c.heartbeat_at < _ago(DEAD_AFTER_S))
        res = db.execute(update(stage_calls).where(
            UNKNOWN_ROWS, stage_calls.c.status == literal_column("'started'"),
            or_(stage_calls.c.writer_id.in_(dead),
                and_(stage_calls.c.writer_id.is_(None), stage_calls.c.started_at < _ago(ORPHAN_STARTED_AFTER_S))))
            .values(status="unknown", error=func.coalesce(stage_calls.c.error,
                                                          "the writing process ended before the attempt did")))
        db.execute(delete(ledger_writers).where(ledger_writers.c.heartbeat_at < _ago(DEAD_AFTER_S)))
        if res.rowcount:
            log.warning("%d LLM attempts of ended processes marked unknown (possibly billed)", res.rowcount)
        return res.rowcount

    def _replay_chunk(self) -> None:
        try:
            self._replay_chunk_once(careful=False)
        except Exception as e:
            if is_transient(e):
                raise
            self._replay_chunk_once(careful=True)

    def _replay_chunk_once(self, careful: bool) -> None:
        c = self._claims[0]
        salvaged: list = []
        try:
            n, rows, quarantined, end = self._replay_lines(c, careful, salvaged)
        except _Raced:
            # another process moved this file's position since we read it (a lock that did not hold
            # on a network folder): it replays the file; our chunk rolled back whole, no row twice
            log.warning("spill file %s is being replayed by another process; leaving it", c.name)
            c.release()
            self._claims.pop(0)
            return
        if end is None:
            self._replayed_whole(c)
            return
        c.pos = end
        with self._cv:
            self.replayed += n
            self.quarantined += quarantined
            self.salvaged += len(salvaged)
            self.written += len(rows) - quarantined

    def _replay_lines(self, c: spill.Claim, careful: bool, salvaged: list):
        """One chunk of a claimed file in one transaction with its new position; `end` None: no lines left."""
        with self._engine.begin() as db:
            recorded = rollups.get_state(db, c.key)
            offset = int(recorded or 0)
            lines, end = c.lines_from(offset, REPLAY_CHUNK)
            if not lines:
                return 0, [], 0, None
            rows: list[tuple[str, Any]] = []
            quarantined = 0
            for line in lines:
                got = spill.decode(line, SCHEMA_VERSION, WRITABLE)
                if isinstance(got, str):
                    _quarantine(db, "spill_line", {"line": line[:2000], "file": c.name}, got)
                    quarantined += 1
                else:
                    rows.append(got)
            quarantined += insert_rows(db, rows, careful=careful, salvaged=salvaged)
            n = sum(t != "ledger_losses" for t, _ in rows)
            if n:
                db.execute(insert(ledger_losses).values(kind="replayed", rows=n, reason="spill file replayed",
                                                        spill_path=c.name, recorded_at=utcnow()))
            rollups.fold_dirty(db, query_ids(rows), guarded=careful)
            if not _advance(db, c.key, recorded, str(end)):
                raise _Raced()
        return n, rows, quarantined, end

    def _replayed_whole(self, c: spill.Claim) -> None:
        """The whole file is in the ledger: remove it. Its position stays, at the file's end: a claimed
        name is never used again, and a twin still reading the file (a lock that did not hold) finds
        nothing left to replay instead of starting over."""
        c.done()
        self._claims.pop(0)
        log.warning("spill file %s replayed", c.name)


class _Raced(Exception):
    """Another process advanced the replay position of the file this chunk came from."""


def _advance(db: Connection, key: str, was: str | None, to: str) -> bool:
    """Move a replay position from `was` to `to`, only if it still reads `was` (compare-and-set)."""
    state = ledger_state
    if was is None:
        ins = rollups._insert(db, state).values(name=key, value=to).on_conflict_do_nothing(index_elements=["name"])
        return db.execute(ins.returning(state.c.name)).first() is not None
    moved = update(state).where(state.c.name == key, state.c.value == was).values(value=to)
    return db.execute(moved.returning(state.c.name)).first() is not None
