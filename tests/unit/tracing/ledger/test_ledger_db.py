"""RAG_LEDGER_URL parsing, redaction and what an error means, without a server."""
from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from rag_app.core.errors import ConfigError
from tests.conftest import make_settings
from rag_app.config.ledger_location import WITHHELD, parse_ledger_url, redact, scrub
from tracing.ledger import is_transient
from tracing.ledger.engine import pg_is_transient


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


@pytest.mark.parametrize("url, fragments", [
    ("postgresql://rag:paQ7/sswordZ9@db:5432/ledger", ["paQ7", "sswordZ9"]),  # gave "port 'paQ7' is not a number"
    ("postgresql://rag:secr3tpw/x@db/ledger", ["secr3tpw"]),
    ("postgresql://rag:p@ssword42@db/ledger", ["ssword42"]),  # started, and libpq's host was "ssword42@db"
    ("postgresql://rag:hunter2?x@db/ledger", ["hunter2"]),
    # #46: both `@` and `?`: libpq took host `t`, a query string `Tail99@db/ledger`, and printed the tail
    ("postgresql://rag:S3cr@t?Tail99@db/ledger", ["S3cr", "Tail99"]),
    ("postgresql://rag:S3cr@t/Tail99@db:5432/ledger", ["S3cr", "Tail99"]),
])
def test_an_unencoded_character_in_the_password_is_refused_quoting_none_of_it(tmp_path, url, fragments):
    with pytest.raises(ConfigError) as e:
        make_settings(tmp_path, ledger_url=url)
    msg = str(e.value)
    assert msg.startswith("RAG_LEDGER_URL: the password holds an unencoded") and "percent-encode" in msg
    assert not [f for f in fragments if f in msg] and "\n" not in msg


def test_an_encoded_password_and_an_at_in_the_query_are_fine(tmp_path):
    assert make_settings(tmp_path, ledger_url="postgresql://rag:p%40ss%2Fw@db/ledger").ledger.dialect == "postgresql"
    assert make_settings(tmp_path, ledger_url="postgresql://db/ledger?user=a@b").ledger.dialect == "postgresql"


def test_rag_commands_refuse_a_malformed_ledger_url_in_one_line_without_its_password(tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    for url, secret in (("postgresql://rag:p@ssword42@db/ledger", "ssword42"),
                        ("postgresql://rag:S3cr@t?Tail99@db/ledger", "Tail99")):
        env.update(RAG_DATA_DIR=str(tmp_path), RAG_LEDGER_URL=url)
        for cmd in (["report"], ["budgets"], ["serve", "--port", "1"]):
            out = subprocess.run([sys.executable, "-m", "rag_app.cli.main", *cmd], env=env, capture_output=True,
                                 text=True, timeout=120)
            assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
            assert secret not in out.stderr + out.stdout and "RAG_LEDGER_URL" in out.stderr


def test_redact():
    assert redact("postgresql://u:p%40ss@h/d?password=x&sslmode=require") == \
        "postgresql://u:***@h/d?password=***&sslmode=require"
    assert redact("postgresql://u@h/d") == "postgresql://u@h/d"


@pytest.mark.parametrize("url, secret", [
    ("postgresql://rag:p#ss/w?rd@db:5432/ledger", "p#ss/w?rd"),  # unencoded # / ? in the password
    ("postgresql://rag:a@b@db:5432/ledger", "a@b"),  # an unencoded @
    ("postgresql://rag:hunter2@db:5432/ledger?password=other", "other"),
    ("host=db user=rag password=hunter2 dbname=ledger", "hunter2"),  # a conninfo string
])
def test_no_password_survives_redaction_encoded_or_not(url, secret):
    assert secret not in redact(url)
    # a driver error echoing a fragment of a URL it could not parse: scrubbed by the known password
    echoed = f'invalid dsn: missing "=" after "{url[len("postgresql://rag:"):]}" in connection info string'
    assert secret not in scrub(echoed, url)


def test_a_short_password_inside_ordinary_words_is_neither_garbled_nor_shown():
    refused = 'connection failed: connection to server at "127.0.0.1", port 1 failed: Connection refused'
    # masking "on" everywhere gave "c***necti***", which both garbles the message and shows the password
    assert scrub(refused, "postgresql://rag:on@127.0.0.1:1/ledger") == WITHHELD
    assert scrub(refused, "postgresql://rag:zz@127.0.0.1:1/ledger") == refused  # not in it: whole
    long = "postgresql://rag:connection-secret@127.0.0.1:1/ledger"
    assert scrub(f"auth failed for connection-secret; {refused}", long) == f"auth failed for ***; {refused}"


def test_a_bad_password_never_reaches_a_message(tmp_path):
    url = "postgresql://rag:p#ss/w?rd@127.0.0.1:1/ledger"
    try:
        make_settings(tmp_path, ledger_url=url)
    except ConfigError as e:  # refused as a URL: the message names the setting, never the password
        assert "p#ss" not in str(e) and "w?rd" not in str(e)


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
