"""Connections to the ledger: one SQLAlchemy Engine per use, on SQLite or PostgreSQL, and what an error
means (retry, or fix a setting).

SQLite: WAL, synchronous=NORMAL; the driver's own transaction handling is switched off and we issue
BEGIN ourselves (SQLAlchemy's recipe), so DDL is transactional and SAVEPOINTs work; writers begin with
BEGIN IMMEDIATE (take the write lock first: two processes never both migrate or deadlock on upgrade).
A read-only engine opens the file `mode=ro` (and `immutable=1` where SQLite cannot create the WAL's
shared memory beside a read-only file).

PostgreSQL (psycopg 3): the user's RAG_LEDGER_URL goes to libpq as written (SQLAlchemy never parses it,
so a password with an unencoded `#`, `?` or `/` works and is never shown); every connection is bounded:
connect timeout, statement and lock timeout, TCP user timeout and keepalives, and a client-side wait
bound (`BoundedConnection`): a SIGSTOPped server still has its kernel acknowledge every packet and never
runs its own statement timeout, so only the client can give up on it. A pool (pre-pinged) serves the
service's threads.
"""
from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.pool import NullPool, QueuePool, StaticPool

from rag_app.config import LedgerTarget, LedgerURLError, as_target, redact

# SQLite result codes that mean "the ledger cannot take writes right now", not "this row is bad".
TRANSIENT = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_FULL", "SQLITE_READONLY", "SQLITE_IOERR",
             "SQLITE_CANTOPEN", "SQLITE_PROTOCOL", "SQLITE_NOMEM", "SQLITE_NOTADB")
_TRANSIENT_TEXT = ("locked", "disk is full", "readonly", "disk i/o", "unable to open", "not a database")
# SQLSTATE classes that mean "the ledger cannot take writes right now": 08 connection, 53 insufficient
# resources (disk full), 57 operator intervention (admin shutdown, statement timeout), 58 system/IO
# error, 40 serialization/deadlock, 55 lock not available; 25006 read-only transaction (a standby).
PG_TRANSIENT_CLASSES = ("08", "53", "57", "58", "40", "55")
PG_TRANSIENT_STATES = ("25006",)
# Connection failures that retrying will not fix: say what to change in RAG_LEDGER_URL instead.
PG_CONFIG_STATES = ("28000", "28P01", "3D000")
_PG_CONFIG_TEXT = ("password authentication failed", "no pg_hba.conf entry", "does not exist",
                   "role \"", "invalid dsn", "invalid connection option", "missing \"=\"")


@dataclass(frozen=True)
class Bounds:
    """How long one ledger call may take. `connect_s` also bounds waiting for a pooled connection."""

    connect_s: float = 10.0
    statement_s: float | None = None
    pool_size: int = 5
    max_overflow: int = 5


def make_engine(where: Any, *, bounds: Bounds = Bounds(), write: bool = True, read_only: bool = False,
                immutable: bool = False) -> Engine:
    """An Engine on the ledger `where` names (a LedgerTarget, a RAG_LEDGER_URL, or a SQLite path)."""
    target = as_target(where)
    if target.dialect == "postgresql":
        return _pg_engine(target, bounds)
    return _sqlite_engine(Path(target.path or "ledger.sqlite"), bounds, write=write and not read_only,
                          read_only=read_only, immutable=immutable)


def _sqlite_engine(path: Path, bounds: Bounds, *, write: bool, read_only: bool, immutable: bool) -> Engine:
    if read_only:
        uri = f"{path.resolve().as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")
        creator = lambda: sqlite3.connect(uri, uri=True, timeout=bounds.connect_s, check_same_thread=False)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        creator = lambda: sqlite3.connect(path, timeout=bounds.connect_s, check_same_thread=False)
    if read_only:  # opened for one report or check: no connection kept
        engine = create_engine("sqlite+pysqlite://", creator=creator, poolclass=NullPool)
    else:  # a few threads on one file: a small pool, waiting at most `connect_s` for a connection
        engine = create_engine("sqlite+pysqlite://", creator=creator, poolclass=QueuePool, pool_size=bounds.pool_size,
                               max_overflow=bounds.max_overflow, pool_timeout=bounds.connect_s)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, record):
        dbapi_conn.isolation_level = None  # BEGIN is ours (below): transactional DDL, working SAVEPOINTs
        if not read_only:
            cur = dbapi_conn.cursor()
            _wal_mode(cur, bounds.connect_s)
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn):
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _wal_mode(cur: sqlite3.Cursor, wait_s: float) -> None:
    """Switch a new ledger file to WAL. Processes opening one new file together can be refused the
    switch at once ("database is locked": SQLite does not always run the busy handler for it), so it is
    retried for as long as a connection may wait."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if cur.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def pg_connect_kwargs(bounds: Bounds, application_name: str = "rag-ledger") -> dict:
    # keepalives: a server host that vanished (no RST) is noticed instead of waited on for minutes
    kwargs: dict = {"application_name": application_name, "keepalives": 1, "keepalives_idle": 10,
                    "keepalives_interval": 5, "keepalives_count": 3,
                    "connect_timeout": max(1, int(round(bounds.connect_s)))}
    if bounds.statement_s is not None:
        ms = max(1, int(bounds.statement_s * 1000))
        kwargs["options"] = f"-c statement_timeout={ms} -c lock_timeout={ms}"
        # ... and data the server's host never acknowledges fails the statement in the same bound
        kwargs["tcp_user_timeout"] = max(1000, ms)
    return kwargs


@lru_cache(maxsize=1)
def _flag_dumpers() -> tuple[type, type]:
    """Python bools go in as 0/1: the ledger's flags are INTEGER columns on both engines (SQLite binds a
    bool as an int already; psycopg would send a boolean, which PostgreSQL will not cast to bigint)."""
    import struct

    from psycopg import postgres
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    int8 = postgres.types["int8"].oid

    class FlagText(Dumper):
        oid = int8

        def dump(self, obj):  # noqa: ANN001, ANN201
            return b"1" if obj else b"0"

    class FlagBinary(Dumper):
        oid = int8
        format = Format.BINARY

        def dump(self, obj):  # noqa: ANN001, ANN201
            return struct.pack("!q", 1 if obj else 0)

    return FlagText, FlagBinary


def _flags_as_integers(conn) -> None:  # noqa: ANN001
    for dumper in _flag_dumpers():
        conn.adapters.register_dumper(bool, dumper)


CLIENT_GRACE_S = 2.0  # past the server's own statement timeout: a live server answers first


@lru_cache(maxsize=1)
def _bounded_connection_class():
    import psycopg
    from psycopg import errors as pg_errors

    class BoundedConnection(psycopg.Connection):
        """Every wait on the server gives up after `client_timeout_s` and closes the connection (its
        protocol state is unknown then); the error reads as a lost connection, so the pool drops it."""
        client_timeout_s: float | None = None

        def wait(self, gen, interval=0.1, timeout=None):
            try:
                return super().wait(gen, interval, timeout if timeout is not None else self.client_timeout_s)
            except pg_errors._WaitTimeout:
                self.pgconn.finish()
                raise psycopg.OperationalError(
                    f"the connection is lost: no answer from the server in {self.client_timeout_s:g} s "
                    "(frozen or unreachable)") from None

    return BoundedConnection


def _pg_engine(target: LedgerTarget, bounds: Bounds) -> Engine:
    try:
        import psycopg  # noqa: F401
    except ImportError as e:  # a dependency of this package; only a broken install lacks it
        raise LedgerURLError("RAG_LEDGER_URL names PostgreSQL but psycopg is not installed; "
                             "pip install 'psycopg[binary]'") from e
    url, kwargs = target.url, pg_connect_kwargs(bounds)
    conn_class = _bounded_connection_class()

    def connect():
        conn = conn_class.connect(url, **kwargs)
        _flags_as_integers(conn)
        if bounds.statement_s is not None:
            conn.client_timeout_s = bounds.statement_s + CLIENT_GRACE_S
        return conn

    return create_engine("postgresql+psycopg://", creator=connect,
                         pool_size=bounds.pool_size, max_overflow=bounds.max_overflow,
                         pool_timeout=bounds.connect_s, pool_pre_ping=True, pool_recycle=1800)


def memory_engine(conn: sqlite3.Connection) -> Engine:
    """An Engine over one in-memory SQLite connection (a migrated copy of a read-only ledger)."""
    engine = create_engine("sqlite+pysqlite://", creator=lambda: conn, poolclass=StaticPool)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, record):
        dbapi_conn.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(c):
        c.exec_driver_sql("BEGIN")

    return engine


# -- what an error means ----------------------------------------------------------------------------
def driver_error(e: BaseException) -> BaseException:
    """The database driver's own exception under SQLAlchemy's wrapper (or `e`)."""
    return getattr(e, "orig", None) or e


def pg_is_transient(e: BaseException) -> bool | None:
    """True/False for psycopg errors, None when `e` is not one."""
    e = driver_error(e)
    try:
        import psycopg
    except ImportError:  # pragma: no cover
        return None
    if not isinstance(e, psycopg.Error):
        return None
    state = getattr(e, "sqlstate", None) or ""
    if state:
        return state[:2] in PG_TRANSIENT_CLASSES or state in PG_TRANSIENT_STATES
    # no SQLSTATE: the failure happened on the client side (refused, lost, closed connection)
    return isinstance(e, (psycopg.OperationalError, psycopg.InterfaceError)) and not pg_is_config_error(e)


def pg_is_config_error(e: BaseException) -> bool:
    e = driver_error(e)
    state = getattr(e, "sqlstate", None) or ""
    if state:
        return state in PG_CONFIG_STATES
    text = str(e).lower()
    return any(t in text for t in _PG_CONFIG_TEXT)


def config_error(target: LedgerTarget, e: BaseException) -> LedgerURLError | None:
    """The LedgerURLError to stop on when `e` is a setting to fix (wrong user, password, database, or no
    right to create tables), with the fix; None otherwise. One line, no credential."""
    if not (pg_is_config_error(e) or getattr(driver_error(e), "sqlstate", None) == "42501"):
        return None
    user, db = target.user_and_database()
    return LedgerURLError(f"RAG_LEDGER_URL={target.display}: {target.scrub(redacted_error(e))}; check the user, "
                          "password, host and database name; the user must own the database to create the "
                          f"ledger's tables (createdb -O {user or '<user>'} {db or '<database>'})")


def is_transient(e: BaseException) -> bool:
    """The ledger cannot take this call right now (retry later), as opposed to "this row is bad"."""
    if isinstance(e, (sa_exc.TimeoutError, sa_exc.DisconnectionError)):  # no pooled connection in time, or lost
        return True
    if isinstance(e, sa_exc.DBAPIError) and e.connection_invalidated:
        return True
    pg = pg_is_transient(e)
    if pg is not None:
        return pg
    e = driver_error(e)
    if not isinstance(e, sqlite3.Error):
        return isinstance(e, OSError)
    name = getattr(e, "sqlite_errorname", None) or ""
    if name:
        return name.startswith(TRANSIENT)
    return isinstance(e, sqlite3.OperationalError) and any(t in str(e).lower() for t in _TRANSIENT_TEXT)


def redacted_error(e: BaseException) -> str:
    """One line about a ledger error, with any URL's credentials masked (libpq names host and user)."""
    e = driver_error(e)
    return redact(f"{type(e).__name__}: {str(e).strip()}".replace("\n", " "))[:500]


def url_for_path(path: Path) -> str:
    """The RAG_LEDGER_URL naming a SQLite file."""
    return "sqlite:///" + quote(str(Path(path).resolve()))
