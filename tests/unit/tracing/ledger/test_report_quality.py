"""Answer quality and feedback beside the spend in `rag report --by` and per day and variant
(GET /v1/reports/quality): real SQLite ledgers written through the real writer, every figure checked
against a row-by-row computation from the ledger file."""
from __future__ import annotations

import csv
import io
import json
import random
import sqlite3
from collections import defaultdict

import pytest

from tests.unit.tracing.ledger.test_report_rollups import raw, write_varied_ledger
from tracing.ledger import Ledger, LedgerWriter

QUALITY = ("scored", "groundedness", "invalid_citation_rate", "feedback_up", "feedback_down", "feedback_count")


def add_quality(path, seed=5) -> None:
    """Scores for most answers (none for user u8's, some with no claim: groundedness NULL), and users'
    feedback on some, through the writer and the repository as the service writes them."""
    conn = raw(path)
    ids = [r[0] for r in conn.execute("SELECT query_id FROM queries WHERE kind = 'query' AND "
                                      "COALESCE(user_id, '') <> 'u8' ORDER BY query_id")]
    conn.close()
    rng = random.Random(seed)
    w = LedgerWriter(path)
    for qid in ids:
        if rng.random() < 0.15:
            continue  # not scored (an error, a query before quality was kept)
        g = None if rng.random() < 0.1 else rng.choice((0.0, 0.25, 0.5, 1.0))
        for metric, value in (("groundedness", g), ("invalid_citations", rng.choice((0, 0, 0, 1, 3))),
                              ("retrieval_confidence", rng.random())):
            w.put("query_quality", {"query_id": qid, "metric": metric, "source": "local", "value": value,
                                    "recorded_at": "2026-11-06T00:00:00+00:00"})
    assert w.flush(30)
    w.close()
    with Ledger.open(path) as L:
        for i, qid in enumerate(ids[::3]):
            L.add_feedback(qid, "reviewer", (1, -1, 0, 1)[i % 4], None, "2026-11-07T00:00:00+00:00")
            if i % 5 == 0:
                L.add_feedback(qid, "other", -1, "错了", "2026-11-07T00:00:01+00:00")


def expected(conn: sqlite3.Connection, dim: str, variant: str | None = None) -> dict:
    """Each group's quality fields, row by row in Python from the ledger's own rows."""
    key_of = {"user": "q.user_id", "key": "q.api_key_id", "variant": "q.variant",
              "day": "substr(q.started_at, 1, 10)",
              "model": "(SELECT MAX(s.model) FROM stage_calls s WHERE s.query_id = q.query_id AND s.stage = 'generate')"}[dim]
    where = "q.kind = 'query'" + (" AND q.variant = ?" if variant else "")
    args = (variant,) if variant else ()
    groups: dict = defaultdict(lambda: {"g": [], "inv": [], "fb": []})
    for k, metric, value in conn.execute(
            f"SELECT {key_of}, m.metric, m.value FROM queries q JOIN query_quality m USING (query_id) "
            f"WHERE {where} AND m.source = 'local' AND m.value IS NOT NULL", args):
        if metric in ("groundedness", "invalid_citations"):
            groups[k or None]["g" if metric == "groundedness" else "inv"].append(value)
    for k, score in conn.execute(f"SELECT {key_of}, f.score FROM queries q JOIN query_feedback f USING (query_id) "
                                 f"WHERE {where}", args):
        groups[k or None]["fb"].append(score)
    return {k: {"scored": len(v["inv"]), "groundedness": round(sum(v["g"]) / len(v["g"]), 4) if v["g"] else None,
                "invalid_citation_rate": round(sum(x > 0 for x in v["inv"]) / len(v["inv"]), 4) if v["inv"] else None,
                "feedback_up": v["fb"].count(1), "feedback_down": v["fb"].count(-1), "feedback_count": len(v["fb"])}
            for k, v in groups.items()}


@pytest.fixture
def scored(tmp_path):
    path = tmp_path / "ledger.sqlite"
    write_varied_ledger(path)
    add_quality(path)
    with Ledger.open(path) as L:
        conn = raw(path)
        yield L, conn, path
        conn.close()


@pytest.mark.parametrize("dim", ["variant", "model", "day", "user", "key"])
def test_by_rows_carry_each_groups_quality_and_feedback(scored, dim):
    L, conn, _ = scored
    want = expected(conn, dim)
    rows = L.by(dim)
    assert rows and all(set(QUALITY) <= set(r) for r in rows)
    for r in rows:
        got = {k: r[k] for k in QUALITY}
        assert got == want.get(r[dim], {"scored": 0, "groundedness": None, "invalid_citation_rate": None,
                                        "feedback_up": 0, "feedback_down": 0, "feedback_count": 0}), (dim, r[dim])
    if dim != "model":  # every scored answer is in some row (the model rows: see below)
        assert sum(r["scored"] for r in rows) == sum(v["scored"] for v in want.values()) > 0
        assert sum(r["feedback_count"] for r in rows) == sum(v["feedback_count"] for v in want.values()) > 0
    for var in ("a", "b"):  # --variant narrows the quality as it narrows the spend
        narrowed = expected(conn, dim, var)
        for r in L.by(dim, variant=var):
            assert r["scored"] == narrowed.get(r[dim], {"scored": 0})["scored"], (dim, var, r[dim])


def test_a_group_nobody_scored_is_null_never_zero(scored):
    L, _, _ = scored
    u8 = next(r for r in L.by("user") if r["user"] == "u8")
    assert u8["queries"] > 0 and u8["scored"] == 0
    assert u8["groundedness"] is None and u8["invalid_citation_rate"] is None  # not 0% grounded, not 0% invalid


def test_model_books_quality_to_the_generating_model(scored):
    L, conn, _ = scored
    models = {r["model"]: r for r in L.by("model")}
    assert models["emb"]["scored"] == 0 and models["emb"]["groundedness"] is None  # an embedder answers nothing
    per_gen = conn.execute(
        "SELECT s.model, COUNT(DISTINCT m.query_id) FROM stage_calls s JOIN query_quality m USING (query_id) "
        "JOIN queries q USING (query_id) WHERE s.stage = 'generate' AND q.kind = 'query' "
        "AND m.metric = 'invalid_citations' GROUP BY s.model").fetchall()
    assert {m: models[m]["scored"] for m, _ in per_gen} == dict(per_gen)
    assert models["mystery-model"]["scored"] > 0 and models["mystery-model"]["cost_per_1k_queries_usd"] is None
    assert all(set(QUALITY).isdisjoint(r) for r in L.by("stage"))  # a stage has no answer of its own


def test_a_ledger_before_quality_reports_null_not_zero(tmp_path):
    from tests.unit.tracing.ledger.test_migrations import load_fixture

    path = tmp_path / "old.sqlite"
    load_fixture(path, "ledger_0.4.0.sql")
    with Ledger.open_read(path, migrated_copy=True) as L:
        assert "m013_answer_quality" in L.pending
        rows = L.by("variant")
        assert rows and all(r[k] is None for r in rows for k in QUALITY)


def cli(args, monkeypatch, path):
    from typer.testing import CliRunner

    from rag_app.cli.main import app

    monkeypatch.setenv("RAG_DATA_DIR", str(path.parent))
    res = CliRunner().invoke(app, ["report", *args])
    assert res.exit_code == 0, res.output
    return res.stdout


def test_cli_by_table_csv_and_json_carry_quality(scored, monkeypatch):
    L, conn, path = scored
    want = expected(conn, "variant")
    data = json.loads(cli(["--by", "variant", "--format", "json"], monkeypatch, path))
    assert {r["variant"]: {k: r[k] for k in QUALITY} for r in data["rows"]} == want
    rows = list(csv.DictReader(io.StringIO(cli(["--by", "day", "--format", "csv"], monkeypatch, path))))
    assert set(QUALITY) <= set(rows[0])
    days = expected(conn, "day")
    for r in rows:
        w = days[r["day"]]
        assert int(r["scored"]) == w["scored"] and float(r["groundedness"]) == w["groundedness"]
        assert int(r["feedback_count"]) == w["feedback_count"] and "e-" not in r["invalid_citation_rate"]
    users = {r["user"]: r for r in csv.DictReader(io.StringIO(cli(["--by", "user", "--format", "csv"], monkeypatch, path)))}
    assert users["u8"]["scored"] == "0" and users["u8"]["groundedness"] == ""  # empty, never "0"
    for dim in ("variant", "model", "day", "user"):
        table = cli(["--by", dim], monkeypatch, path)
        assert max(len(line) for line in table.splitlines()) <= 80, dim
        assert f"answer quality by {dim}" in table
    table = cli(["--by", "variant"], monkeypatch, path)
    quality = table[table.index("answer quality by variant"):]
    a = want["a"]
    line = next(x for x in quality.splitlines() if x.lstrip("│ ").startswith("a "))
    assert f"{a['groundedness']:.1%}" in line and f"{a['invalid_citation_rate']:.1%}" in line
    assert "answer quality" not in cli(["--by", "stage"], monkeypatch, path)


def test_quality_over_time_per_day_and_variant_over_http(tmp_path):
    """GET /v1/reports/quality on the real service: each day's and variant's cost per query (the mean
    over priced queries, from the rollups) beside its quality, equal to the row-by-row figures."""
    from fastapi.testclient import TestClient

    from rag_app.service.app import create_app
    from tests.conftest import make_settings

    settings = make_settings(tmp_path, api_token="tok")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    write_varied_ledger(settings.ledger_path)
    add_quality(settings.ledger_path)
    conn = raw(settings.ledger_path)
    h = {"Authorization": "Bearer tok"}
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        r = client.get("/v1/reports/quality", params={"since": "2026-11-02", "until": "2026-11-04"}, headers=h)
        assert r.status_code == 200, r.text
        body = r.json()
        assert (body["since"], body["until"]) == ("2026-11-02", "2026-11-04")
        rows = body["rows"]
        assert [(x["day"], x["variant"]) for x in rows] == [(d, v) for d in ("2026-11-02", "2026-11-03", "2026-11-04")
                                                            for v in (None, "a", "b")]
        for x in rows:
            where = "substr(q.started_at, 1, 10) = ? AND q.kind = 'query' AND " + (
                "q.variant = ?" if x["variant"] else "q.variant IS NULL")
            args = (x["day"], x["variant"]) if x["variant"] else (x["day"],)
            costs = [c for (c,) in conn.execute(f"SELECT c.cost_nano_usd FROM query_costs c JOIN queries q USING (query_id) "
                                                f"WHERE {where}", args)]
            priced = [c for c in costs if c is not None]
            assert x["queries"] == len(costs) and x["priced_queries"] == len(priced)
            assert x["cost_per_query_usd"] == pytest.approx(sum(priced) / len(priced) / 1e9, abs=1e-9)  # to the nano-dollar
            want = expected(conn, "day", x["variant"]) if x["variant"] else None
            if want is not None:
                assert {k: x[k] for k in QUALITY} == want[x["day"]], x
        one = client.get("/v1/reports/quality", params={"since": "2026-11-01", "until": "2026-11-30", "variant": "a"},
                         headers=h).json()["rows"]
        assert {x["variant"] for x in one} == {"a"} and len(one) == 5
        assert client.get("/v1/reports/quality", params={"days": 7}, headers=h).json()["rows"] == []  # not these days
        assert client.get("/v1/reports/quality", params={"since": "2026-11-05", "until": "2026-11-01"},
                          headers=h).status_code == 422
        assert client.get("/v1/reports/quality", params={"since": "2025-01-01", "until": "2026-11-01"},
                          headers=h).status_code == 422
        assert client.get("/v1/reports/quality").status_code == 401
    conn.close()


def test_the_series_reads_only_its_days_through_indexes(scored):
    """The quality series is one grouped read of the day rollups (each answer's quality is in them since
    m022), through their key: a plan that scanned query_quality or query_totals would read the whole ledger
    for a 30-day chart."""
    from sqlalchemy import event

    from tracing.ledger import quality_groups

    L, _, _ = scored
    for variant in (None, "a"):
        sent: list = []
        with L.engine.connect() as db:
            event.listen(db, "before_cursor_execute",
                         lambda c, cur, sql, p, ctx, many: sent.append((sql, p)) if sql.startswith("SELECT") else None)
            assert quality_groups.over_time(db, "2026-11-02", "2026-11-03", variant=variant)
            conn = db.connection.dbapi_connection
            steps = [str(r[3]) for sql, p in sent for r in conn.execute("EXPLAIN QUERY PLAN " + sql, p)]
        assert len(sent) == 1  # the day rollups: cost and quality in one grouped read
        assert not any(s.split()[1] in ("query_totals", "query_quality", "query_feedback") for s in steps), steps
        assert all(s.startswith("SEARCH report_rollup") for s in steps if "report_rollup" in s), steps
