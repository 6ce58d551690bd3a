"""Reports at volume (#11): the rollups the ledger writer keeps give exactly the numbers of the full
computation (every row through Python) on a varied ledger; exports stream; --by on CLI and API."""
from __future__ import annotations

import io
import json
import random
import sqlite3
import tracemalloc

import pytest

from rag_app.experiments.comparison import Stats, compare_live, welch_interval
from rag_app.experiments.variants import Experiment
from tracing.ledger import Ledger, LedgerWriter, percentile
from tracing.ledger import rollups

MODELS = ("gpt-4o-mini", "deepseek-chat", "mystery-model")  # the last one has no price


def write_varied_ledger(path, n=120, seed=3) -> None:
    """Through the real writer: unpriced models, retries, timeouts, errors, `started` attempts (some
    finished later, some never), stage rows whose query row never came (orphans), users, API keys,
    variants, an experiment with live and shadow traffic, other origins, context budgets."""
    rng = random.Random(seed)
    w = LedgerWriter(path, batch=7)  # small batches: a query's rows span several of them
    late_rows: list[dict] = []
    for i in range(n):
        qid = f"q{i:04d}"
        ts = f"2026-11-{1 + i % 5:02d}T{i % 24:02d}:00:{i % 60:02d}.000+00:00"
        user = f"u{rng.randrange(9)}"
        variant = ("a", "b", None)[i % 3]
        model = rng.choice(MODELS)
        side = rng.random()
        origin, shadow_of = ("live", None) if side < 0.6 else ("shadow", "q0000") if side < 0.75 else ("cli", None)
        common = {"query_id": qid, "variant": variant, "experiment": "e" if variant else None, "started_at": ts}
        query_row = {**common, "kind": "query", "question": f"问题{i}", "mode": "llm",
                     "status": rng.choice(("ok", "ok", "ok", "error")), "latency_ms": rng.choice((None, 120.5, 900.0, 50.25)),
                     "user_id": user if i % 7 else None, "api_key_id": rng.choice(("k1", "k2", None)),
                     "arm": "control" if variant == "a" else "treatment", "sticky": int(i % 4 != 0),
                     "origin": origin, "shadow_of": shadow_of}
        if i % 4 == 0:  # its query row first: the stage rows after it refresh totals already rolled up
            w.put("queries", query_row)
        w.put("stage_calls", {**common, "stage": "embed_query", "status": "ok", "model": "emb", "input_tokens": 20,
                              "cost_nano_usd": 400, "shadow_cost_nano_usd": 400, "price_source": "genai-prices",
                              "cache_hits": rng.randint(0, 1), "cache_misses": 1, "usage_source": "local"})
        w.put("stage_calls", {**common, "stage": "retrieve", "status": "ok", "cost_nano_usd": 0})
        context = rng.randint(300, 1000)  # every attempt of a call resends the same packed prompt
        for attempt in range(1, 1 + rng.choice((1, 1, 2, 3))):
            last = attempt > 1 and rng.random() < 0.5
            status = "ok" if last else rng.choice(("ok", "retry", "timeout", "error"))
            unpriced = model == "mystery-model"
            tin = rng.randint(100, 3000)
            row = {**common, "stage": "generate", "attempt": attempt, "call_id": qid, "model": model,
                   "attempt_id": f"{qid}-{attempt}", "input_tokens": tin, "price_source": "unpriced" if unpriced else "bundled",
                   "cost_nano_usd": None if unpriced else tin * 150, "shadow_cost_nano_usd": None if unpriced else tin * 150,
                   "possibly_billed": 1, "usage_source": "estimated:o200k" if rng.random() < 0.3 else "provider"}
            w.write_now("stage_calls", {**row, "status": "started"})
            if rng.random() < 0.9:  # else: the process "died" before the attempt ended
                w.put("stage_calls", {**row, "status": status, "output_tokens": rng.randint(0, 400),
                                      "output_at_risk_tokens": 500 if status == "timeout" else None,
                                      "cost_nano_usd": None if unpriced else tin * 150 + 77 * attempt,
                                      "context_budget_tokens": 1000 if i % 2 else 500,
                                      "context_tokens": context})
        if i % 4 == 0:
            pass  # written before its stage rows (above)
        elif rng.random() < 0.93:  # else an orphan: its query row never arrives
            late_rows.append(query_row)
        if len(late_rows) > 3:
            w.put("queries", late_rows.pop(0))
    for row in late_rows:
        w.put("queries", row)
    for i in range(0, n, 5):  # answer-cache hits: a query row, no stage rows; every 10th saving unknown (unpriced)
        w.put("queries", {"query_id": f"hit{i:04d}", "kind": "query", "question": f"问题{i}", "mode": "llm",
                          "status": "ok", "variant": ("a", "b", None)[i % 3], "started_at": f"2026-11-0{1 + i % 5}T23:{1 + (i // 5) % 59:02d}:30.250+00:00",
                          "user_id": f"u{i % 9}", "origin": "live", "cache_hit": 1, "latency_ms": 2.5,
                          "saved_cost_nano_usd": None if i % 10 == 0 else 100_000 + i})
    w.put("queries", {"query_id": "ingest-1", "kind": "ingest", "status": "ok", "started_at": "2026-11-02T00:00:00"})
    assert w.flush(30)
    w.close()


def same_report(a, b) -> None:
    assert a.totals.keys() == b.totals.keys()
    for k in a.totals:
        if k == "stages":
            assert a.totals[k] == {st: v for st, v in b.totals[k].items() if st in a.totals[k]}, k
        elif isinstance(b.totals[k], float):
            assert a.totals[k] == pytest.approx(b.totals[k], rel=1e-12, abs=1e-15), k
        else:
            assert a.totals[k] == b.totals[k], k
    assert a.queries == b.queries


def raw(path) -> sqlite3.Connection:
    """The SQLite file itself, for a test to look at its rows."""
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    return conn


@pytest.fixture
def ledger(tmp_path):
    path = tmp_path / "ledger.sqlite"
    write_varied_ledger(path)
    with Ledger.open(path) as L:
        conn = raw(path)
        yield L, conn
        conn.close()


def test_rollup_reports_equal_the_full_computation(ledger):
    L, conn = ledger
    assert conn.execute("SELECT COUNT(*) FROM stage_calls WHERE status = 'started'").fetchone()[0] > 0
    full = L.report_full()
    assert full.totals["unpriced_queries"] > 0 and full.totals["retries"] > 0 and full.totals["timeouts"] > 0
    assert full.totals["unknown_attempts"] > 0  # attempts whose process "died" are at risk in the totals
    hits = full.totals["answer_cache_hits"]
    assert hits > 0 and 0 < full.totals["saved_unknown_hits"] < hits and full.totals["saved_cost_usd"] > 0
    assert full.totals["answer_cache_hit_rate"] == round(hits / full.totals["queries"], 4)
    for kw in ({}, {"last": 17}, {"variant": "a"}, {"variant": "b", "last": 5}, {"last": 10_000}):
        same_report(L.report(**kw), L.report_full(**kw))
    # per-query rows of the listing view agree with the query_costs view, unpriced stays NULL
    view = {r["query_id"]: dict(r) for r in conn.execute("SELECT * FROM query_costs WHERE kind = 'query'")}
    for r in conn.execute("SELECT * FROM query_totals WHERE kind = 'query'"):
        v = view[r["query_id"]]
        for col in ("cost_nano_usd", "priced_cost_nano_usd", "shadow_cost_nano_usd", "unpriced_rows", "retries",
                    "timeouts", "estimated_rows", "output_at_risk_tokens", "input_tokens", "output_tokens",
                    "waste_nano_usd"):
            assert r[col] == v[col], (r["query_id"], col)


def test_incremental_rollups_equal_a_rebuild(ledger):
    L, conn = ledger

    def snapshot():
        totals = [tuple(r) for r in conn.execute("SELECT * FROM query_totals ORDER BY query_id")]
        sums = {tuple(r[:6]): tuple(round(x, 3) for x in r[6:]) for r in conn.execute("SELECT * FROM report_rollup")
                if any(r[6:])}
        return totals, sums
    incremental = snapshot()
    assert L.rebuild_totals() > 0
    assert snapshot() == incremental
    assert L.audit()["totals_stale"] is None


def test_by_dimension_sums_match_the_rows(ledger):
    L, conn = ledger
    full = L.report_full().totals
    for dim in ("user", "key", "variant", "day"):
        rows = L.by(dim)
        assert sum(r["queries"] for r in rows) == full["queries"]
        assert sum(r["cost_usd"] for r in rows) == pytest.approx(full["cost_usd"], rel=1e-12)
        assert sum(r["unpriced_queries"] for r in rows) == full["unpriced_queries"]
        assert sum(r["answer_cache_hits"] for r in rows) == full["answer_cache_hits"]  # hit rate and $ saved per dim
        assert sum(r["saved_cost_usd"] for r in rows) == pytest.approx(full["saved_cost_usd"], rel=1e-12)
        assert sum(r["saved_unknown_hits"] for r in rows) == full["saved_unknown_hits"]
    row_shadow = sum(v["shadow_cost_usd"] for v in full["stages"].values())  # every row's, unpriced queries' too
    for dim in ("model", "stage"):  # every row's cost is booked to its own model and stage: the sums agree
        rows = L.by(dim)
        assert sum(r["cost_usd"] or 0 for r in rows) == pytest.approx(full["cost_usd"], rel=1e-12)
        assert sum(r["shadow_cost_usd"] for r in rows) == pytest.approx(row_shadow, rel=1e-12)
    users = {r["user"]: r for r in L.by("user")}
    expect = conn.execute("SELECT COUNT(*), SUM(c.priced_cost_nano_usd) FROM query_costs c JOIN queries q USING (query_id) "
                          "WHERE q.kind = 'query' AND q.user_id = 'u3'").fetchone()
    assert users["u3"]["queries"] == expect[0] and users["u3"]["cost_usd"] == pytest.approx(expect[1] / 1e9)
    assert users[None]["queries"] > 0  # queries without a user are one row, not dropped
    models = {r["model"]: r for r in L.by("model")}
    mystery = conn.execute("SELECT COUNT(DISTINCT s.query_id), COUNT(*) FROM stage_calls s JOIN queries q USING (query_id) "
                           "WHERE q.kind = 'query' AND s.model = 'mystery-model'").fetchone()
    assert models["mystery-model"]["queries"] == mystery[0] and models["mystery-model"]["unpriced_rows"] == mystery[1]
    assert models["mystery-model"]["cost_per_1k_queries_usd"] is None  # unpriced, never $0
    assert models["mystery-model"]["cost_usd"] is None  # nothing of it priced: null, not 0.0
    assert models["mystery-model"]["cost_is_lower_bound"]
    with pytest.raises(ValueError, match="unknown dimension"):
        L.by("planet")


def test_compare_live_from_rollups_equals_the_row_by_row_statistics(ledger):
    L, conn = ledger
    exp = Experiment("e", "a", "b", 50, "s")
    res = compare_live(L, exp)
    for arm, variant, side in (("control", "a", "live"), ("treatment", "b", "live")):
        qs = [dict(r) for r in conn.execute(
            "SELECT q.status, q.latency_ms, q.sticky, c.cost_nano_usd, c.retries, c.timeouts FROM queries q "
            "JOIN query_costs c USING (query_id) WHERE q.kind = 'query' AND q.experiment = 'e' AND q.variant = ? "
            "AND q.origin = 'live' AND q.shadow_of IS NULL", (variant,))]
        got = res["arms"][arm]
        cost = [q["cost_nano_usd"] / 1e9 for q in qs if q["cost_nano_usd"] is not None]
        lat = [q["latency_ms"] or 0.0 for q in qs]
        assert got["queries"] == len(qs) > 5 and got["unpriced_queries"] == len(qs) - len(cost)
        assert got["cost_per_query"]["mean"] == pytest.approx(sum(cost) / len(cost))
        assert got["cost_per_query"]["p50"] == pytest.approx(percentile(cost, 50))
        assert got["cost_per_query"]["p95"] == pytest.approx(percentile(cost, 95))
        assert got["latency_ms"] == pytest.approx({"p50": percentile(lat, 50), "p95": percentile(lat, 95)})
        assert got["error_rate"] == pytest.approx(sum(q["status"] == "error" for q in qs) / len(qs))
        assert got["timeout_rate"] == pytest.approx(sum(q["timeouts"] > 0 for q in qs) / len(qs))
        assert got["sticky_queries"] == sum(1 for q in qs if q["sticky"])


def test_welch_from_sums_equals_welch_from_lists():
    rng = random.Random(5)
    a = [rng.gauss(1000, 80) for _ in range(300)]
    b = [rng.gauss(950, 120) for _ in range(200)]
    from_lists = welch_interval(a, b)
    sums = lambda xs: Stats.from_sums(len(xs), sum(xs), sum(x * x for x in xs))  # noqa: E731
    from_sums = welch_interval(sums(a), sums(b))
    assert (from_sums.diff, from_sums.low, from_sums.high) == pytest.approx(
        (from_lists.diff, from_lists.low, from_lists.high), rel=1e-9)
    assert Stats.from_sums(3, 3000, 3e6).var == 0.0  # identical values: no negative variance from rounding


def test_a_failing_fold_keeps_the_rows_and_a_rebuild_mends_the_totals(tmp_path, monkeypatch, caplog):
    def broken(db, ids):
        raise ValueError("bug in the rollups")
    monkeypatch.setattr(rollups, "fold", broken)
    w = LedgerWriter(tmp_path / "l.sqlite")
    w.put("queries", {"query_id": "x", "kind": "query", "status": "ok", "started_at": "2026-11-01T00:00:00"})
    w.put("stage_calls", {"query_id": "x", "stage": "generate", "status": "ok", "started_at": "t"})
    assert w.flush(10)
    w.close()
    monkeypatch.undo()
    conn = raw(tmp_path / "l.sqlite")
    assert conn.execute("SELECT COUNT(*) FROM stage_calls").fetchone()[0] == 1  # rows kept
    with Ledger.open(tmp_path / "l.sqlite") as L:
        assert "bug in the rollups" in L.audit()["totals_stale"]
        L.rebuild_totals()
        assert L.audit()["totals_stale"] is None and L.report().totals["queries"] == 1


def test_rows_written_around_the_writer_are_folded_in(tmp_path):
    """Triggers mark a query dirty whoever writes its rows: a row inserted with plain SQL reaches the
    totals at the writer's next step, without `--rebuild-totals` (0.4.0 left such rows out)."""
    path = tmp_path / "l.sqlite"
    w = LedgerWriter(path)
    w.put("queries", {"query_id": "q1", "kind": "query", "status": "ok", "started_at": "2026-11-01T00:00:00"})
    assert w.flush(10)
    conn = raw(path)
    conn.execute("INSERT INTO stage_calls (query_id, stage, status, started_at, cost_nano_usd, price_source) "
                 "VALUES ('q1', 'generate', 'ok', '2026-11-01T00:00:00', 5000, 'bundled')")
    conn.execute("INSERT INTO queries (query_id, kind, status, started_at) VALUES ('q2', 'query', 'ok', "
                 "'2026-11-01T00:00:01')")
    conn.commit()
    w.put("queries", {"query_id": "q3", "kind": "query", "status": "ok", "started_at": "2026-11-01T00:00:02"})
    assert w.flush(10)
    w.close()
    with Ledger.open(path) as L:
        L.fold_backlog()  # what a writer's idle step does
        totals = L.report().totals
    assert totals["queries"] == 3 and totals["cost_usd"] == pytest.approx(5000e-9)


def test_json_export_streams_in_flat_memory(tmp_path):
    """The export's peak Python memory is about the same for 2,000 and 8,000 queries (one page of rows)."""
    from bench.ledger_volume import build
    from rag_app.present.report_export import write_report
    from rich.console import Console

    peaks = {}
    for n in (2_000, 8_000):
        path = tmp_path / f"l{n}.sqlite"
        build(path, n)
        ledger = Ledger.open_read(path)
        sink = open(tmp_path / f"out{n}.json", "w", encoding="utf-8")
        tracemalloc.start()
        write_report(ledger, "json", sink, Console(file=io.StringIO()), last=None, variant=None, prices="original",
                     table_rows=20)
        peaks[n] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        sink.close()
        ledger.close()
        data = json.loads((tmp_path / f"out{n}.json").read_text(encoding="utf-8"))
        assert len(data["queries"]) == data["totals"]["queries"] == n
        assert data["queries"][0]["started_at"] >= data["queries"][-1]["started_at"]  # newest first
    assert peaks[8_000] < 1.5 * peaks[2_000], peaks  # a list of every row would be ~4x


def test_a_started_attempt_alone_is_in_the_totals_at_once(tmp_path):
    """write_now's `started` row commits with its totals: after a crash it is the only row of its query
    (an orphan the audit must count, with its input-estimate cost), and nothing else will refresh it."""
    w = LedgerWriter(tmp_path / "l.sqlite")
    assert w.write_now("stage_calls", {"query_id": "lonely", "stage": "generate", "status": "started", "attempt_id": "a1",
                                       "cost_nano_usd": 900, "price_source": "bundled", "started_at": "t"})
    with Ledger.open_read(tmp_path / "l.sqlite") as L:  # no flush: what a reader sees while the attempt is in flight
        a = L.audit()
    assert (a["orphan_stage_rows"], a["orphan_queries"], a["orphan_cost_usd"]) == (1, 1, 900e-9)
    assert a["unknown_attempts"] == 1
    w.close()


def test_folding_reads_only_the_given_queries(tmp_path):
    """Every statement of a fold reaches the ledger's tables by query id only: a plan that scanned
    query_totals or stage_calls, or walked one of their other indexes (query_totals' `kind` ones match
    every query), would make each batch read the whole ledger (22k -> 3.9k rows/s on a 5,000-query
    ledger in 0.4.0; the first set-based shares walked the `kind` index 13 times per batch)."""
    from sqlalchemy import event

    write_varied_ledger(tmp_path / "l.sqlite", n=60)
    with Ledger.open(tmp_path / "l.sqlite") as L, L.engine.connect() as db:
        sent: list[tuple[str, object]] = []
        event.listen(L.engine, "before_cursor_execute", lambda c, cur, sql, params, ctx, many: sent.append((sql, params)))
        rollups.fold(db, ["q0001", "q0002", "q0003"])
        assert len(sent) >= 4
        raw = db.connection.dbapi_connection
        for sql, params in sent:
            for row in raw.execute("EXPLAIN QUERY PLAN " + sql, params):
                words = str(row[3]).split()
                if len(words) > 1 and words[0] in ("SCAN", "SEARCH") and words[1] in ("query_totals", "stage_calls",
                                                                                    "queries", "s"):
                    assert words[0] == "SEARCH" and "(query_id=?)" in row[3], (row[3], sql[:300])
        db.rollback()


def test_cli_says_when_totals_are_stale_and_rebuilds_them(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from rag_app.cli.main import app

    path = tmp_path / "ledger.sqlite"
    write_varied_ledger(path, n=30)
    conn = raw(path)
    conn.execute("UPDATE query_totals SET priced_cost_nano_usd = priced_cost_nano_usd + 1")  # drift
    conn.execute("INSERT INTO rollup_state (name, value) VALUES ('stale', 'ValueError: boom')")
    conn.commit()
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path))
    res = CliRunner().invoke(app, ["report", "--format", "table"])
    assert res.exit_code == 0 and "run `rag report --rebuild-totals`" in " ".join(res.output.split())
    res = CliRunner().invoke(app, ["report", "--format", "json", "--rebuild-totals"])
    assert res.exit_code == 0 and "rebuild-totals" not in json.dumps(json.loads(res.stdout)["ledger"])
    with Ledger.open(path) as L:
        assert L.audit()["totals_stale"] is None
        same_report(L.report(), L.report_full())


def test_index_walk_percentiles_equal_the_list_computation(ledger_url):
    """The percentile walk starts from the nearer end of the index and compare's latency percentile counts
    NULLs as 0: every rank (first, middle, last, ties, NULLs before and around the rank) equals
    `percentile()` over the same values, on both backends."""
    from sqlalchemy import Column, Float, Integer, MetaData, Table, insert, select

    from tracing.ledger.reports import percentile_nulls_as_zero, percentile_of

    pv = Table("pv", MetaData(), Column("k", Integer), Column("v", Float))
    rng = random.Random(7)
    cases, rows = [], []
    for k in range(40):
        n, nulls = rng.randint(1, 12), rng.randint(0, 4)
        vals = [float(rng.choice((rng.randint(0, 5), rng.uniform(0, 100)))) for _ in range(n)]
        nulls = min(nulls, n)
        vals[:nulls] = [None] * nulls
        rng.shuffle(vals)
        rows += [{"k": k, "v": v} for v in vals]
        cases.append((k, vals, nulls))
    with Ledger.open(ledger_url) as L, L.engine.begin() as db:
        pv.create(db)
        db.execute(insert(pv), rows)
        for k, vals, nulls in cases:
            present = [v for v in vals if v is not None]
            source = select(pv).where(pv.c.k == k).subquery("t")
            for p in (0, 5, 25, 50, 62.5, 90, 95, 99, 100):
                assert percentile_of(db, source, "v", len(present), p) == pytest.approx(percentile(present, p)), (vals, p)
                got = percentile_nulls_as_zero(db, source, "v", len(vals), nulls, p)
                assert got == pytest.approx(percentile([0.0 if v is None else v for v in vals], p)), (vals, nulls, p)


def test_percentile_walk_skips_at_most_half_the_index(tmp_path):
    """An OFFSET reads every entry it skips: p95 of a million queries must start from the top end
    (on PostgreSQL the walk from the bottom made `rag experiment compare` take 1.7 s at 1M queries)."""
    from sqlalchemy import Column, Integer, MetaData, Table, event, insert, select

    from tracing.ledger.reports import percentile_of

    pv = Table("pv", MetaData(), Column("v", Integer))
    offsets = []
    with Ledger.open(tmp_path / "p.sqlite") as L:
        event.listen(L.engine, "before_cursor_execute",
                     lambda conn, cur, stmt, params, ctx, many: offsets.append(params[-1]) if "OFFSET" in stmt else None)
        with L.engine.begin() as db:
            pv.create(db)
            db.execute(insert(pv), [{"v": i} for i in range(1000)])
            for p in (1, 50, 95, 99.9):
                assert percentile_of(db, select(pv).subquery("t"), "v", 1000, p) == pytest.approx(999 * p / 100)
    assert max(offsets) <= 500 and offsets[2] <= 50, offsets
