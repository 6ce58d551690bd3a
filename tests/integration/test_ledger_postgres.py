"""The writer on a real PostgreSQL server that fails the ways servers do: stopped and restarted, its
connections killed by an administrator, switched to read-only. Rows wait in the buffer (never in
quarantine, never lost) and land when the server takes writes again. Plus: a URL that no retry
fixes (wrong database) stops startup with a message naming RAG_LEDGER_URL and not the password."""
from __future__ import annotations

import time

import psycopg
import pytest
import sqlalchemy as sa

from rag_app.core.errors import ConfigError
from tests.conftest import HANG_S, make_settings
from tests.fakes.pg_cluster import PgCluster
from rag_app.config.ledger_location import LedgerURLError
from tracing.ledger import Ledger, LedgerWriter

pytestmark = pytest.mark.postgres


def row(i, **kw):
    return {"query_id": f"q{i}", "stage": "retrieve", "status": "ok", "started_at": "2026-11-30T00:00:00+00:00", **kw}


def count(url) -> int:
    with Ledger.open(url) as L, L.engine.connect() as db:
        return db.execute(sa.text("SELECT COUNT(*) FROM stage_calls")).scalar()


def landed(w, timeout=30.0) -> bool:
    """flush() answers False at once while the ledger fails: retry it until the writer catches up."""
    deadline = time.monotonic() + timeout
    while not w.flush(1):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def wait_for(cond, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def indexed_settings(url: str, tmp_path):
    """Settings of a service on one indexed law (BM25, extractive) whose ledger is `url`."""
    from rag_app.app import RagApp
    from tests.conftest import LAWS

    settings = make_settings(tmp_path, ledger_url=url, llm_mode="extractive", retriever="bm25",
                             ledger_spill_dir=tmp_path / "spill")
    with RagApp(settings) as app:
        assert not app.ingest([LAWS / "民法商法/公司法(2018-10-26).md"]).errors
    return settings


@pytest.fixture
def own_cluster(postgres):
    """A cluster of this test's own, so stopping it disturbs no other test (also when the others use
    RAG_TEST_POSTGRES_URL's server, which a test must not stop)."""
    from tests.conftest import REQUIRE_POSTGRES
    from tests.fakes.pg_cluster import binaries_missing

    if binaries_missing():
        if REQUIRE_POSTGRES:
            pytest.fail(f"RAG_REQUIRE_POSTGRES=1 but {binaries_missing()}")
        pytest.skip(f"stopping a server needs a throwaway cluster: {binaries_missing()}")
    cluster = PgCluster().start()
    yield cluster
    cluster.destroy()


def test_server_stopped_then_restarted_rows_buffer_then_land(own_cluster, tmp_path):
    url = own_cluster.new_database()
    w = LedgerWriter(url, spill_dir=tmp_path / "spill", direct_timeout_s=1.0)
    for i in range(10):
        w.put("stage_calls", row(i))
    assert w.write_now("stage_calls", row(99, attempt_id="a99", status="started")) is True  # a direct connection
    assert w.flush(10)
    own_cluster.stop()
    t0 = time.monotonic()
    assert w.write_now("stage_calls", row(100, attempt_id="a100", status="started")) is False  # falls back to the buffer
    assert time.monotonic() - t0 < 10  # 1 s asked; a margin that holds at load 20
    for i in range(10, 60):
        w.put("stage_calls", row(i))
    wait_for(lambda: w.health()["status"] == "degraded")
    h = w.health()
    assert h["buffered_rows"] >= 50 and h["last_error"] and h["quarantined_rows"] == 0
    assert w.flush(0.5) is False
    own_cluster.start()  # same data dir and port
    assert landed(w), w.health()
    # the direct path reconnects too (a connection lost with the old server is not reused)
    assert w.write_now("stage_calls", row(101, attempt_id="a101", status="started")) is True
    h = w.health()
    w.close()
    assert (h["status"], h["quarantined_rows"], h["lost_rows"], h["spilled_rows"]) == ("ok", 0, 0, 0)
    assert count(url) == 63


def test_writer_started_while_the_server_is_down_catches_up(own_cluster, tmp_path):
    url = own_cluster.new_database()
    own_cluster.stop()
    w = LedgerWriter(url, spill_dir=tmp_path / "spill")  # starts degraded instead of failing the service
    assert w.health()["status"] == "degraded"
    for i in range(5):
        w.put("stage_calls", row(i))
    own_cluster.start()
    assert landed(w), w.health()
    w.close()
    assert count(url) == 5


def test_admin_shutdown_and_read_only_are_waited_out_not_quarantined(postgres, tmp_path):
    url = postgres.new_database()
    dbname = url.rsplit("/", 1)[1].split("?")[0]
    w = LedgerWriter(url, spill_dir=tmp_path / "spill")
    w.put("stage_calls", row(0))
    assert w.flush(10)
    with psycopg.connect(postgres.admin_url, autocommit=True) as admin:
        # every connection of the writer is killed by an administrator (57P01 admin_shutdown)
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (dbname,))
        for i in range(1, 20):
            w.put("stage_calls", row(i))
        assert landed(w), w.health()
        assert count(url) == 20
        # the database turns read-only (25006 read_only_sql_transaction): rows wait
        admin.execute(f'ALTER DATABASE "{dbname}" SET default_transaction_read_only = on')
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (dbname,))
        for i in range(20, 40):
            w.put("stage_calls", row(i))
        wait_for(lambda: w.health()["last_error"] is not None and "read-only" in w.health()["last_error"])
        assert w.health()["quarantined_rows"] == 0 and w.health()["buffered_rows"] > 0
        admin.execute(f'ALTER DATABASE "{dbname}" SET default_transaction_read_only = off')
    assert landed(w), w.health()
    h = w.health()
    w.close()
    assert (h["quarantined_rows"], h["lost_rows"]) == (0, 0)
    assert count(url) == 40


def test_a_wrong_database_stops_startup_with_the_fix_and_no_password(postgres, tmp_path):
    base = postgres.admin_url.rsplit("/", 1)[0]
    if "@" in base:
        scheme, rest = base.split("://", 1)
        user = rest.split("@", 1)[0].split(":", 1)[0]
        base = f"{scheme}://{user}:hunter2@{rest.split('@', 1)[1]}"
    url = f"{base}/no_such_ledger_db"
    with pytest.raises(LedgerURLError) as e:
        LedgerWriter(url, spill_dir=tmp_path / "spill")
    msg = str(e.value)
    assert "RAG_LEDGER_URL" in msg and "no_such_ledger_db" in msg and "does not exist" in msg
    assert "hunter2" not in msg
    from rag_app.app import RagApp
    with pytest.raises(ConfigError, match="RAG_LEDGER_URL") as e2:
        RagApp(make_settings(tmp_path, ledger_url=url))
    assert "hunter2" not in str(e2.value)


def test_service_answers_while_the_postgres_ledger_is_down(own_cluster, tmp_path):
    """The server goes away under a running `rag serve`: /v1/ask still answers (its stage rows shown from
    the buffer, `"ledger": "buffered"`), /healthz says degraded, the read endpoints say 503 (not 500);
    when the server is back the rows land and the endpoints read them."""
    import httpx

    from tests.integration.test_service import Server

    settings = indexed_settings(own_cluster.new_database(), tmp_path)
    with Server(settings) as base:
        first = httpx.post(f"{base}/v1/ask", json={"question": "一人有限责任公司是什么？"}, timeout=HANG_S).json()
        assert first["ledger"] == "ok" and {s["stage"] for s in first["stages"]} >= {"retrieve", "generate"}
        own_cluster.stop()
        r = httpx.post(f"{base}/v1/ask", json={"question": "股东会的职权有哪些？"}, timeout=HANG_S)
        assert r.status_code == 200, r.text
        down = r.json()
        assert down["ledger"] == "buffered" and {s["stage"] for s in down["stages"]} >= {"retrieve", "generate"}
        assert httpx.get(f"{base}/healthz", timeout=10).json()["status"] == "degraded"
        listed = httpx.get(f"{base}/v1/queries", timeout=30)
        assert listed.status_code == 503 and "RAG_LEDGER_URL" not in listed.text and "unreachable" in listed.text
        own_cluster.start()
        wait_for(lambda: httpx.get(f"{base}/healthz", timeout=10).json()["status"] == "up")
        one = httpx.get(f"{base}/v1/queries/{down['query_id']}", timeout=30)
        assert one.status_code == 200 and len(one.json()["stages"]) == len(down["stages"])
        assert httpx.get(f"{base}/v1/queries", timeout=30).json()["total"] == 2


def test_a_wrong_password_or_missing_rights_stop_startup_with_the_fix_and_no_password(own_cluster, tmp_path):
    template = own_cluster.add_password_user("rag", "right-pw")
    time.sleep(0.5)  # the reload is asynchronous
    owned = own_cluster.new_database(owner="rag").rsplit("/", 1)[1]
    LedgerWriter(template.format(password="right-pw", db=owned), spill_dir=tmp_path / "spill").close()
    with pytest.raises(LedgerURLError) as e:
        LedgerWriter(template.format(password="hunter2", db=owned), spill_dir=tmp_path / "spill")
    msg = str(e.value)
    assert "RAG_LEDGER_URL=postgresql://rag:***@" in msg and "password authentication failed" in msg
    assert "hunter2" not in msg and "right-pw" not in msg
    # a database the user may not create tables in (PostgreSQL 15+: public schema is the owner's)
    foreign = own_cluster.new_database().rsplit("/", 1)[1]
    with pytest.raises(LedgerURLError) as e:
        LedgerWriter(template.format(password="right-pw", db=foreign), spill_dir=tmp_path / "spill")
    msg = str(e.value)
    assert "RAG_LEDGER_URL=postgresql://rag:***@" in msg and "permission denied" in msg and "createdb -O" in msg
    assert "right-pw" not in msg


def test_a_unix_socket_url_works(postgres, tmp_path):
    if postgres.external:
        pytest.skip("the socket dir is the throwaway cluster's")
    name = postgres.new_database().rsplit("/", 1)[1]
    url = f"postgresql://postgres@/{name}?host={postgres.dir}&port={postgres.port}"
    w = LedgerWriter(url, spill_dir=tmp_path / "spill")
    w.put("stage_calls", row(1))
    assert w.flush(10)
    w.close()
    assert count(url) == 1


def test_the_direct_path_is_bounded_by_its_timeout_and_a_timeout_is_transient(postgres, tmp_path):
    """A `started` row waits at most RAG_LEDGER_DIRECT_TIMEOUT_S for a server that is slow (here: a lock
    held by someone else), then goes to the buffer and lands when the lock is released."""
    url = postgres.new_database()
    w = LedgerWriter(url, spill_dir=tmp_path / "spill", direct_timeout_s=0.3)
    blocker = psycopg.connect(url)
    blocker.execute("LOCK TABLE stage_calls IN EXCLUSIVE MODE")  # held until rollback
    t0 = time.monotonic()
    assert w.write_now("stage_calls", row(1, attempt_id="a1", status="started")) is False
    assert time.monotonic() - t0 < 4.0  # 0.3 s asked (+ the 2 s client grace at most)
    blocker.rollback()
    blocker.close()
    assert landed(w), w.health()
    assert w.health()["quarantined_rows"] == 0
    w.close()
    assert count(url) == 1


def test_a_frozen_server_is_a_503_within_the_bound_and_loses_no_rows(own_cluster, tmp_path):
    """SIGSTOP the whole server (its kernel still acknowledges every packet, and its own statement
    timeout never runs): asks still answer, reads answer 503 within the client-side bound instead of
    hanging, /healthz answers; after SIGCONT every row lands once."""
    import httpx

    from tests.integration.test_service import Server

    settings = indexed_settings(own_cluster.new_database(), tmp_path)
    with Server(settings) as base:
        assert httpx.get(f"{base}/v1/queries", timeout=30).status_code == 200  # the pool holds connections
        first = httpx.post(f"{base}/v1/ask", json={"question": "一人有限责任公司是什么？"}, timeout=HANG_S).json()
        own_cluster.freeze()
        try:
            t0 = time.monotonic()
            listed = httpx.get(f"{base}/v1/queries", timeout=HANG_S)
            took = time.monotonic() - t0
            assert listed.status_code == 503, listed.text
            assert took < 30, took  # 0.4.0 hung for as long as the server stayed frozen (91-106 s at 90 s)
            asked = httpx.post(f"{base}/v1/ask", json={"question": "股东会的职权有哪些？"}, timeout=HANG_S)
            assert asked.status_code == 200 and asked.json()["stages"]
            assert httpx.get(f"{base}/healthz", timeout=30).status_code == 200
        finally:
            own_cluster.thaw()
        wait_for(lambda: httpx.get(f"{base}/healthz", timeout=10).json()["status"] == "up", timeout=HANG_S)
        got = httpx.get(f"{base}/v1/queries", timeout=30).json()
        assert got["total"] == 2
        for qid in (first["query_id"], asked.json()["query_id"]):
            one = httpx.get(f"{base}/v1/queries/{qid}", timeout=30).json()
            assert len(one["stages"]) == len({s["stage"] for s in one["stages"]}), one["stages"]  # each row once


def test_a_0_4_0_postgres_ledger_upgrades_in_place_with_its_rows(postgres, tmp_path):
    """The 0.4.0 release's PostgreSQL ledger (pg_dump of m001-m007 with rows, tests/fixtures/) loaded by psql:
    a 0.5.0 writer migrates it in place, every row survives, and the totals folded again in batches equal
    a rebuild from the rows and the full computation."""
    import subprocess
    from pathlib import Path

    from tests.fakes.pg_cluster import find_bin

    url = postgres.new_database()
    dump = Path(__file__).parents[1] / "fixtures" / "ledger_0.4.0.pg.sql"
    subprocess.run([find_bin("psql") or "psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", str(dump)],
                   check=True, capture_output=True, timeout=HANG_S)
    tables = ("queries", "stage_calls", "shadow_pairs", "repricings", "ledger_quarantine", "ledger_losses")
    with psycopg.connect(url) as c:
        before = {t: c.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables}
        assert c.execute("SELECT COUNT(*) FROM _migrations").fetchone()[0] == 7
    assert sum(map(len, before.values())) > 20

    LedgerWriter(url, spill_dir=tmp_path / "spill").close()
    with Ledger.open(url) as L:
        L.fold_backlog()
        assert L.audit()["totals_backlog_queries"] == 0
        with psycopg.connect(url) as c:
            for t, old in before.items():
                now = c.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
                if t == "stage_calls":  # on purpose: the attempt 0.4.0 left `started` is now `unknown`
                    assert [r[5] for r in now].count("unknown") == [r[5] for r in old].count("started") == 1
                    now = [r[:5] + ("started",) + r[6:18] + (None,) + r[19:] if r[5] == "unknown" else r for r in now]
                assert [r[:len(old[0])] for r in now] == old, t
            rolled = c.execute("SELECT * FROM report_rollup ORDER BY 1, 2, 3, 4, 5, 6").fetchall()
        report, full = L.report(), L.report_full()
        assert report.totals["queries"] == full.totals["queries"] == 6
        assert report.totals["cost_usd"] == pytest.approx(full.totals["cost_usd"])
        assert report.totals["unknown_attempts"] == 1
        L.rebuild_totals()
        with psycopg.connect(url) as c:
            assert c.execute("SELECT * FROM report_rollup ORDER BY 1, 2, 3, 4, 5, 6").fetchall() == rolled


def test_a_batch_of_plain_rows_goes_as_copy_and_a_bad_row_is_quarantined_alone(postgres, tmp_path):
    """Plain inserts of one shape go as COPY (the writer's inserts cost more than raw executemany's). A
    row COPY refuses fails the batch's first try; the guarded retry quarantines that row and writes the
    rest, one statement each: nothing lost, nothing written twice."""
    from tracing.ledger import writer as ledger_writer

    url = postgres.new_database()
    copies = []
    real = ledger_writer._copy_run
    ledger_writer._copy_run = lambda db, table, cols, run: (copies.append(len(run)), real(db, table, cols, run))
    try:
        w = LedgerWriter(url, batch=1000)
        assert w.flush(HANG_S)
        for i in range(120):
            w.put("stage_calls", row(i, input_tokens="many" if i == 60 else i))  # one value no integer column takes
        assert landed(w, HANG_S)
        h = w.health()
        w.close()
    finally:
        ledger_writer._copy_run = real
    # the first try went as COPY (the writer may have taken the first rows alone, before the rest came)
    assert copies and max(copies) >= ledger_writer.COPY_MIN_ROWS
    assert (h["quarantined_rows"], h["lost_rows"]) == (1, 0)
    assert count(url) == 119
    with Ledger.open(url) as L, L.engine.connect() as db:
        assert db.execute(sa.text("SELECT COUNT(DISTINCT query_id) FROM stage_calls")).scalar() == 119
        assert "many" in db.execute(sa.text("SELECT row_json FROM ledger_quarantine")).scalar()
