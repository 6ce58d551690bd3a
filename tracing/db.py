"""Where the ledger lives (`RAG_LEDGER_URL`) and one connection shape for both engines.

Every reader and the writer talk to the ledger through the sqlite3 API they were written against:
`conn.execute(sql, params)` with `?` placeholders, returning a cursor to iterate / `fetchone()` /
`fetchall()`, rows that answer both `row[0]` and `row["col"]` / `dict(row)`, `commit()`, `with conn:`
(commit or roll back, never close), `in_transaction`, and `isolation_level = None` for "I issue BEGIN
and COMMIT myself". On SQLite that is a plain `sqlite3.Connection` (behaviour unchanged). On
PostgreSQL (psycopg 3) `PgConnection` gives the same shape:

- SQL is translated once per statement text (cached): `?` -> `%s` outside string literals, literal
  `%` escaped; `INTEGER PRIMARY KEY AUTOINCREMENT` -> `BIGSERIAL PRIMARY KEY`; `INTEGER` -> `BIGINT`
  (nano-dollar sums overflow int4); `REAL` -> `DOUBLE PRECISION` (PostgreSQL's REAL is 4 bytes);
  `BEGIN IMMEDIATE` -> `BEGIN`; `INSERT OR IGNORE` -> `ON CONFLICT DO NOTHING`; `INSERT OR REPLACE`
  -> `ON CONFLICT (key) DO UPDATE` for the tables in `CONFLICT_KEYS`; `PRAGMA` is skipped.
- Results come back as SQLite would give them: `numeric` (what SUM over BIGINT returns) as int when
  it has no fraction part, else float; booleans as 0/1. Python bool parameters go in as 0/1.
- Transactions follow sqlite3's legacy rule: with the default `isolation_level` a data-changing
  statement opens a transaction that `commit()` ends; a SELECT alone never holds one open.

Readers that need engine-specific SQL ask `dialect(conn)`; `has_table()` replaces `sqlite_master`.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote

from rag_app.ledger_location import (ENV, LedgerTarget, LedgerURLError, as_target,  # noqa: F401  (re-exported)
                                     parse_ledger_url, redact)

# The key each table's "replace" (upsert) conflicts on: INSERT OR REPLACE needs it on PostgreSQL.
CONFLICT_KEYS = {"queries": "query_id", "shadow_pairs": "control_query_id", "_migrations": "name"}


def dialect(conn) -> str:
    return getattr(conn, "dialect", "sqlite")


def has_table(conn, name: str) -> bool:
    """A table or view of that name exists (read only)."""
    if dialect(conn) == "postgresql":
        sql = ("SELECT 1 FROM information_schema.tables WHERE table_name = ? "
               "AND table_schema = current_schema()")
    else:
        sql = "SELECT 1 FROM sqlite_master WHERE name = ?"
    return conn.execute(sql, (name,)).fetchone() is not None


# -- PostgreSQL ---------------------------------------------------------------------------------
_SEGMENTS = re.compile(r"('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*)", re.S)
_WORDS = [(re.compile(p, re.I), r) for p, r in (
    (r"\bINTEGER\s+PRIMARY\s+KEY\s+AUTOINCREMENT\b", "BIGSERIAL PRIMARY KEY"),
    (r"\bINTEGER\b", "BIGINT"),
    (r"\bREAL\b", "DOUBLE PRECISION"),
    (r"\bBEGIN\s+(IMMEDIATE|DEFERRED|EXCLUSIVE)\b", "BEGIN"),
)]
_OR_IGNORE = re.compile(r"^\s*INSERT\s+OR\s+IGNORE\s+INTO\b", re.I)
_OR_REPLACE = re.compile(r"^\s*INSERT\s+OR\s+REPLACE\s+INTO\s+(\w+)\s*\(([^)]*)\)", re.I)
_DML = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE)\b", re.I)


@lru_cache(maxsize=512)
def translate(sql: str, with_params: bool) -> str:
    """SQLite-flavoured SQL with `?` placeholders -> PostgreSQL SQL for psycopg (see module doc)."""
    parts = _SEGMENTS.split(sql)
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:  # code, not a literal, quoted name or comment
            for pat, rep in _WORDS:
                part = pat.sub(rep, part)
            if with_params:
                part = part.replace("%", "%%").replace("?", "%s")
        elif with_params:
            part = part.replace("%", "%%")
        out.append(part)
    text = "".join(out)
    m = _OR_REPLACE.match(text)
    if m:
        table, cols = m.group(1), [c.strip() for c in m.group(2).split(",")]
        key = CONFLICT_KEYS.get(table.lower())
        if key is None:
            raise ValueError(f"INSERT OR REPLACE INTO {table}: add its key to tracing.db.CONFLICT_KEYS")
        sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in cols if c != key)
        text = _OR_REPLACE.sub(lambda mm: f"INSERT INTO {mm.group(1)} ({mm.group(2)})", text, count=1)
        text = text.rstrip().rstrip(";") + f" ON CONFLICT ({key}) " + (f"DO UPDATE SET {sets}" if sets else "DO NOTHING")
    elif _OR_IGNORE.match(text):
        text = _OR_IGNORE.sub("INSERT INTO", text, count=1).rstrip().rstrip(";") + " ON CONFLICT DO NOTHING"
    return text


def _row_class(names: tuple[str, ...]):
    index = {n.lower(): i for i, n in reversed(list(enumerate(names)))}

    class Row(tuple):
        """A result row like sqlite3.Row: by position, by (case-insensitive) name, and dict(row)."""
        __slots__ = ()

        def __getitem__(self, k):
            if isinstance(k, str):
                try:
                    k = index[k.lower()]
                except KeyError:
                    raise IndexError(f"no column {k!r}") from None
            return tuple.__getitem__(self, k)

        def keys(self) -> list[str]:
            return list(names)

    return Row


def _rows(cursor):
    names = tuple(c.name for c in cursor.description or ())
    cls = _row_class(names)
    return lambda values: cls(values)


class PgCursor:
    """The sqlite3.Cursor surface readers use, over a psycopg cursor."""

    def __init__(self, cur=None):
        self._cur = cur

    @property
    def description(self):
        return None if self._cur is None else self._cur.description

    @property
    def rowcount(self) -> int:
        return -1 if self._cur is None else self._cur.rowcount

    def fetchone(self):
        return None if self._cur is None or self._cur.description is None else self._cur.fetchone()

    def fetchall(self) -> list:
        return [] if self._cur is None or self._cur.description is None else self._cur.fetchall()

    def fetchmany(self, size: int = 1) -> list:
        return [] if self._cur is None or self._cur.description is None else self._cur.fetchmany(size)

    def __iter__(self):
        return iter(self.fetchall()) if self._cur is None or self._cur.description is None else iter(self._cur)

    def close(self) -> None:
        if self._cur is not None:
            self._cur.close()


def _params(params):
    if params is None:
        return None
    if isinstance(params, dict):
        return {k: int(v) if isinstance(v, bool) else v for k, v in params.items()}
    return [int(v) if isinstance(v, bool) else v for v in params]


class PgConnection:
    """A psycopg 3 connection with the sqlite3.Connection surface the ledger code uses."""
    dialect = "postgresql"

    def __init__(self, raw):
        self.raw = raw
        self.isolation_level: str | None = ""  # sqlite3's default: DML opens a transaction
        self.row_factory = None  # accepted and ignored: rows always work both ways

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus
        return self.raw.info.transaction_status != TransactionStatus.IDLE

    def execute(self, sql: str, params=None) -> PgCursor:
        if sql.lstrip()[:6].upper() == "PRAGMA":
            return PgCursor()
        if self.isolation_level is not None and not self.in_transaction and _DML.match(sql):
            self.raw.execute("BEGIN")
        cur = self.raw.cursor(row_factory=_rows)
        cur.execute(translate(sql, params is not None), _params(params))
        return PgCursor(cur)

    def executemany(self, sql: str, seq) -> PgCursor:
        if self.isolation_level is not None and not self.in_transaction and _DML.match(sql):
            self.raw.execute("BEGIN")
        cur = self.raw.cursor(row_factory=_rows)
        cur.executemany(translate(sql, True), [_params(p) for p in seq])
        return PgCursor(cur)

    def commit(self) -> None:
        if self.in_transaction:
            self.raw.execute("COMMIT")

    def rollback(self) -> None:
        if self.in_transaction:
            self.raw.execute("ROLLBACK")

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> "PgConnection":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # sqlite3's meaning: end the transaction, keep the connection open
        if exc_type is None:
            self.commit()
        elif not self.raw.closed:
            self.rollback()


def _install_loaders(raw) -> None:
    from psycopg.adapt import Loader

    class NumericLikeSqlite(Loader):
        def load(self, data):
            text = bytes(data).decode()
            return int(text) if text.lstrip("-").isdigit() else float(text)

    class BoolLikeSqlite(Loader):
        def load(self, data):
            return 1 if bytes(data) == b"t" else 0

    raw.adapters.register_loader("numeric", NumericLikeSqlite)
    raw.adapters.register_loader("bool", BoolLikeSqlite)


def connect_pg(url: str, *, timeout_s: float | None = None, statement_timeout_s: float | None = None,
               application_name: str = "rag-ledger") -> PgConnection:
    """A PostgreSQL connection in autocommit mode underneath (transactions are explicit or follow
    sqlite3's rule, see PgConnection); `statement_timeout_s` bounds every statement and lock wait."""
    import psycopg

    # keepalives: a server host that vanished (no RST) is noticed instead of waited on for minutes
    kwargs: dict = {"autocommit": True, "application_name": application_name, "keepalives": 1,
                    "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}
    if timeout_s is not None:
        kwargs["connect_timeout"] = max(1, int(round(timeout_s)))
    if statement_timeout_s is not None:
        ms = max(1, int(statement_timeout_s * 1000))
        kwargs["options"] = f"-c statement_timeout={ms} -c lock_timeout={ms}"
        # ... and data the server's host never acknowledges fails the statement in the same bound
        kwargs["tcp_user_timeout"] = max(1000, ms)
    raw = psycopg.connect(url, **kwargs)
    _install_loaders(raw)
    return PgConnection(raw)


# -- errors ---------------------------------------------------------------------------------------
# SQLSTATE classes that mean "the ledger cannot take writes right now", not "this row is bad":
# 08 connection, 53 insufficient resources (disk full), 57 operator intervention (admin shutdown,
# statement timeout), 58 system/IO error, 40 serialization/deadlock, 55 lock not available, and
# 25006 read-only transaction (a hot standby, or default_transaction_read_only).
PG_TRANSIENT_CLASSES = ("08", "53", "57", "58", "40", "55")
PG_TRANSIENT_STATES = ("25006",)
# Connection failures that retrying will not fix: say what to change in RAG_LEDGER_URL instead.
PG_CONFIG_STATES = ("28000", "28P01", "3D000")
_PG_CONFIG_TEXT = ("password authentication failed", "no pg_hba.conf entry", "does not exist",
                   "role \"", "invalid dsn", "invalid connection option")


def pg_is_transient(e: BaseException) -> bool | None:
    """True/False for psycopg errors, None when `e` is not one."""
    try:
        import psycopg
    except ImportError:
        return None
    if not isinstance(e, psycopg.Error):
        return None
    state = getattr(e, "sqlstate", None) or ""
    if state:
        return state[:2] in PG_TRANSIENT_CLASSES or state in PG_TRANSIENT_STATES
    # no SQLSTATE: the failure happened on the client side (refused, lost, closed connection)
    return isinstance(e, (psycopg.OperationalError, psycopg.InterfaceError)) and not pg_is_config_error(e)


def pg_is_config_error(e: BaseException) -> bool:
    state = getattr(e, "sqlstate", None) or ""
    if state:
        return state in PG_CONFIG_STATES
    text = str(e).lower()
    return any(t in text for t in _PG_CONFIG_TEXT)


def url_for_path(path: Path) -> str:
    """The RAG_LEDGER_URL naming a SQLite file."""
    return "sqlite:///" + quote(str(Path(path).resolve()))
