"""RAG_LEDGER_URL parsing and the SQLite -> PostgreSQL translation, without a server."""
from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from rag_app.errors import ConfigError
from tests.conftest import make_settings
from tracing.db import parse_ledger_url, pg_is_transient, redact, translate
from tracing.ledger import is_transient


def test_unset_url_keeps_todays_file(tmp_path):
    s = make_settings(tmp_path)
    assert s.ledger.dialect == "sqlite" and s.ledger.path == tmp_path / "data" / "ledger.sqlite"
    assert s.ledger_path == tmp_path / "data" / "ledger.sqlite"
    assert make_settings(tmp_path, ledger_url="  ").ledger.path == tmp_path / "data" / "ledger.sqlite"


def test_sqlite_and_postgres_urls(tmp_path):
    assert parse_ledger_url("sqlite:////var/lib/rag/l.sqlite", Path("x")).path == Path("/var/lib/rag/l.sqlite")
    assert parse_ledger_url("sqlite:///rel/l.sqlite", Path("x")).path == Path("rel/l.sqlite")
    t = parse_ledger_url("postgres://rag:s3cret@db:5432/ledger", Path("x"))
    assert (t.dialect, t.url, t.path) == ("postgresql", "postgresql://rag:s3cret@db:5432/ledger", None)
    assert "s3cret" not in str(t) and "s3cret" not in repr(t) and str(t) == "postgresql://rag:***@db:5432/ledger"
    assert make_settings(tmp_path, ledger_url="postgresql://rag:pw@db/ledger").ledger.dialect == "postgresql"


@pytest.mark.parametrize("url, says", [
    ("mysql://rag:hunter2@db/ledger", "unknown scheme"),
    ("sqlite://", "not a SQLite file URL"),
    ("sqlite:///", "not a SQLite file URL"),
    ("postgresql://rag:hunter2@db:5432", "names no database"),
    ("postgresql://rag:hunter2@db:notaport/ledger", "not a valid PostgreSQL URL"),
    ("ledger.sqlite", "unknown scheme"),
])
def test_a_bad_url_is_refused_at_startup_naming_the_setting_never_the_password(tmp_path, url, says):
    with pytest.raises(ConfigError) as e:
        make_settings(tmp_path, ledger_url=url)
    msg = str(e.value)
    assert "RAG_LEDGER_URL" in msg and says in msg and "hunter2" not in msg and "\n" not in msg
    assert "postgresql://USER:PASSWORD@HOST:5432/DBNAME" in msg or "sqlite:///" in msg


def test_redact():
    assert redact("postgresql://u:p%40ss@h/d?password=x&sslmode=require") == \
        "postgresql://u:***@h/d?password=***&sslmode=require"
    assert redact("postgresql://u@h/d") == "postgresql://u@h/d"


@pytest.mark.parametrize("sql, params, pg", [
    ("SELECT * FROM t WHERE a = ? AND b LIKE 'x%?'", True, "SELECT * FROM t WHERE a = %s AND b LIKE 'x%%?'"),
    ("SELECT 'it''s ?', \"odd?col\" FROM t WHERE c = ?", True, "SELECT 'it''s ?', \"odd?col\" FROM t WHERE c = %s"),
    ("SELECT 1 WHERE s LIKE 'estimated:%'", False, "SELECT 1 WHERE s LIKE 'estimated:%'"),
    ("CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, n INTEGER NOT NULL, r REAL, s TEXT)", False,
     "CREATE TABLE t (id BIGSERIAL PRIMARY KEY, n BIGINT NOT NULL, r DOUBLE PRECISION, s TEXT)"),
    ("SELECT CAST(x AS INTEGER) FROM t", False, "SELECT CAST(x AS BIGINT) FROM t"),
    ("BEGIN IMMEDIATE", False, "BEGIN"),
    ("INSERT OR IGNORE INTO t (a) VALUES (?)", True, "INSERT INTO t (a) VALUES (%s) ON CONFLICT DO NOTHING"),
    ("INSERT OR REPLACE INTO queries (query_id,kind) VALUES (?,?)", True,
     "INSERT INTO queries (query_id,kind) VALUES (%s,%s) ON CONFLICT (query_id) DO UPDATE SET kind = EXCLUDED.kind"),
    ("SELECT 1 -- why? 50%\nFROM t", False, "SELECT 1 -- why? 50%\nFROM t"),
    ("SELECT a % 2 FROM t WHERE b = ?", True, "SELECT a %% 2 FROM t WHERE b = %s"),
])
def test_translate(sql, params, pg):
    assert translate(sql, params) == pg


def test_replace_into_an_unknown_table_says_what_to_do():
    with pytest.raises(ValueError, match="CONFLICT_KEYS"):
        translate("INSERT OR REPLACE INTO rollups (k, v) VALUES (?, ?)", True)


@pytest.mark.parametrize("err, transient", [
    (psycopg.errors.DiskFull("could not extend file"), True),
    (psycopg.errors.AdminShutdown("terminating connection due to administrator command"), True),
    (psycopg.errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction"), True),
    (psycopg.errors.QueryCanceled("canceling statement due to statement timeout"), True),
    (psycopg.errors.SerializationFailure("could not serialize"), True),
    (psycopg.errors.LockNotAvailable("lock timeout"), True),
    (psycopg.OperationalError("connection to server at \"127.0.0.1\", port 1 failed: Connection refused"), True),
    (psycopg.OperationalError("server closed the connection unexpectedly"), True),
    (psycopg.InterfaceError("the connection is closed"), True),
    (psycopg.errors.UniqueViolation("duplicate key"), False),
    (psycopg.errors.NotNullViolation("null value in column"), False),
    (psycopg.errors.InvalidTextRepresentation("invalid input syntax for type bigint"), False),
    (psycopg.errors.NumericValueOutOfRange("bigint out of range"), False),
    (psycopg.errors.UndefinedColumn("column does not exist"), False),
    (psycopg.ProgrammingError("cannot adapt type 'dict'"), False),
    (psycopg.OperationalError('FATAL: password authentication failed for user "rag"'), False),
    (psycopg.OperationalError('FATAL: database "nope" does not exist'), False),
])
def test_postgres_errors_transient_or_quarantined(err, transient):
    assert pg_is_transient(err) is transient
    assert is_transient(err) is transient


def test_non_postgres_errors_are_not_judged_here():
    assert pg_is_transient(ValueError("x")) is None
