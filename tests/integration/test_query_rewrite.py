"""The rewrite lever against a real local OpenAI-compatible server and a real SQLite ledger: each call is an
attempt row of stage `rewrite` (tokens, cost, retries, timeouts), its words are added to the user's for
retrieval, a failed or timed-out rewrite searches the question as asked, and it is off by default."""
from __future__ import annotations

import json
import sqlite3

import pytest

from rag_app.app import RagApp
from rag_app.core.errors import ConfigError
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, Reply, Slow, Status
from tests.integration.test_llm_ledger import gpt4o_mini_cost, indexed  # noqa: F401  (the module's corpus)

# An English question shares no word with the Chinese statute: BM25 alone finds nothing for it to rank.
ASKED = "Who is liable in a company with one shareholder?"
TERMS = Reply(content="一人有限责任公司 股东 公司法", prompt_tokens=140, completion_tokens=12)
ANSWER = Reply(prompt_tokens=300, completion_tokens=40)


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


def open_app(indexed, server, monkeypatch, tmp_path, **overrides):  # noqa: F811
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings = make_settings(indexed, retriever="bm25", openai_base_url=server.base_url,
                             ledger_url=f"sqlite:///{tmp_path}/ledger.sqlite", llm_retry_base_s=0.01,
                             retrieval_levers="none", **overrides)
    return RagApp(settings)


def rows(app: RagApp, query_id: str, stage: str) -> list[dict]:
    app.writer.flush()
    conn = sqlite3.connect(app.settings.ledger_path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(
            "SELECT * FROM stage_calls WHERE query_id = ? AND stage = ? ORDER BY id", (query_id, stage))]
    finally:
        conn.close()


def test_the_rewrite_is_an_attempt_row_with_its_tokens_and_cost_and_its_words_find_the_article(
        indexed, server, monkeypatch, tmp_path):  # noqa: F811
    server.script = [TERMS, ANSWER]
    with open_app(indexed, server, monkeypatch, tmp_path, query_rewrite=True) as app:
        answer = app.ask(ASKED)
        rewrite, = rows(app, answer.query_id, "rewrite")
        retrieve, = rows(app, answer.query_id, "retrieve")
    assert (rewrite["status"], rewrite["attempt"], rewrite["input_tokens"], rewrite["output_tokens"]) == ("ok", 1, 140, 12)
    assert rewrite["cost_nano_usd"] == gpt4o_mini_cost(140, 12) > 0 and rewrite["model"] == "gpt-4o-mini"
    assert retrieve["model"] == "qdrant:bm25+rewrite" and answer.levers == ("rewrite",)
    # the question went to the rewrite prompt; its words joined the user's, which found the one-person company
    assert ASKED in json.dumps(server.requests[0]["body"]["messages"], ensure_ascii=False)
    assert any("一人有限责任公司" in c.chunk.text for c in answer.contexts[:3])
    # the answer's own cost carries the rewrite (what the presenter and a budget see)
    assert [u.stage for u in answer.usage][:1] == ["rewrite"]


def test_a_failed_attempt_is_a_retry_row_and_the_next_one_rewrites(indexed, server, monkeypatch, tmp_path):  # noqa: F811
    server.script = [Status(500), TERMS, ANSWER]
    with open_app(indexed, server, monkeypatch, tmp_path, query_rewrite=True) as app:
        answer = app.ask(ASKED)
        attempts = rows(app, answer.query_id, "rewrite")
    assert [(r["attempt"], r["status"], r["cost_nano_usd"]) for r in attempts] == [
        (1, "retry", 0), (2, "ok", gpt4o_mini_cost(140, 12))]
    assert "500" in attempts[0]["error"] and answer.levers == ("rewrite",)


def test_a_rewrite_that_times_out_searches_the_question_as_asked(indexed, server, monkeypatch, tmp_path):  # noqa: F811
    server.script = [Slow(3), Slow(3), ANSWER]
    with open_app(indexed, server, monkeypatch, tmp_path, query_rewrite=True, query_rewrite_timeout_s=0.3,
                  query_rewrite_max_retries=1) as app:
        answer = app.ask("一人有限责任公司的股东承担什么责任？")
        attempts = rows(app, answer.query_id, "rewrite")
        retrieve, = rows(app, answer.query_id, "retrieve")
        generate = rows(app, answer.query_id, "generate")
    assert [(r["attempt"], r["status"], r["possibly_billed"]) for r in attempts] == [(1, "timeout", 1), (2, "timeout", 1)]
    assert all(r["input_tokens"] > 0 and r["cost_nano_usd"] > 0 for r in attempts)  # the prompt, maybe billed
    assert retrieve["model"] == "qdrant:bm25" and answer.levers == ()  # nothing added: it did not act
    assert answer.mode == "llm" and [r["status"] for r in generate] == ["ok"]
    assert any("一人有限责任公司" in c.chunk.text for c in answer.contexts[:3])  # the user's own words still search


def test_off_by_default_no_rewrite_call_and_no_row(indexed, server, monkeypatch, tmp_path):  # noqa: F811
    server.script = [ANSWER]
    with open_app(indexed, server, monkeypatch, tmp_path) as app:
        assert not app.settings.query_rewrite and not app.query_config().rewrites
        answer = app.ask(ASKED)
        assert rows(app, answer.query_id, "rewrite") == []
    assert len(server.requests) == 1 and "rewrite" not in answer.levers


def test_the_rewrite_is_refused_at_start_up_without_an_llm_beside_the_ranker_or_with_no_prompt(tmp_path):
    with pytest.raises(ConfigError, match=r"RAG_QUERY_REWRITE=1.*needs the answer's LLM"):
        make_settings(tmp_path, query_rewrite=True)
    with pytest.raises(ConfigError, match="does not combine with the ranker"):
        make_settings(tmp_path, query_rewrite=True, openai_base_url="http://127.0.0.1:9/v1",
                      retrieval_levers="rescore+ranker")
    with pytest.raises(ConfigError, match="needs the answer's LLM"):  # named as a lever, it is the same switch
        make_settings(tmp_path, retrieval_levers="charge+rewrite")
    with pytest.raises(ConfigError, match=r"prompt 'rewrite' version 'v9' not found.*available: v1"):
        RagApp(make_settings(tmp_path, query_rewrite=True, openai_base_url="http://127.0.0.1:9/v1",
                             query_rewrite_prompt_version="v9"))


def test_a_gray_release_compares_a_variant_with_the_rewrite_against_one_without(
        indexed, server, monkeypatch, tmp_path):  # noqa: F811
    from rag_app.service.pool import VariantPool

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    exp = tmp_path / "experiments.json"
    exp.write_text(json.dumps({"variants": {"rewrite": {"query_rewrite": True}}, "experiments": {
        "rw": {"control": "default", "treatment": "rewrite", "rollout_pct": 50, "seed": "s"}}}))
    settings = make_settings(indexed, retriever="bm25", openai_base_url=server.base_url, experiments_file=exp,
                             experiment="rw", ledger_url=f"sqlite:///{tmp_path}/ledger.sqlite", retrieval_levers="none")
    server.script = [TERMS, ANSWER]
    pool = VariantPool(settings)
    try:
        assert pool.app_for("rewrite").query_config().rewrites and not pool.app_for("default").query_config().rewrites
        answer = pool.app_for("rewrite").ask(ASKED, variant="rewrite", experiment="rw")
        pool.base.writer.flush()
        conn = sqlite3.connect(settings.ledger_path)
        got = conn.execute("SELECT variant, experiment, status FROM stage_calls WHERE query_id = ? AND stage = "
                           "'rewrite'", (answer.query_id,)).fetchall()
        conn.close()
    finally:
        pool.close()
    assert got == [("rewrite", "rw", "ok")]
    # without an LLM a variant that turns it on is refused when the service starts, not on its first question
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigError, match=r"variants\.rewrite: query_rewrite needs the answer's LLM"):
        VariantPool(make_settings(indexed, retriever="bm25", experiments_file=exp, experiment="rw"))
    # ... and so is one that names it among its levers (a variant takes any setting of the query path)
    exp.write_text(json.dumps({"variants": {"rewrite": {"retrieval_levers": "charge+rewrite"}}, "experiments": {
        "rw": {"control": "default", "treatment": "rewrite", "rollout_pct": 50, "seed": "s"}}}))
    with pytest.raises(ConfigError, match=r"variants\.rewrite: query_rewrite needs the answer's LLM"):
        VariantPool(make_settings(indexed, retriever="bm25", experiments_file=exp, experiment="rw"))


def test_anything_else_going_wrong_in_the_rewrite_still_answers_the_question(indexed, server, monkeypatch,
                                                                            tmp_path):  # noqa: F811
    from rag_app.query import stages

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the rewrite")

    monkeypatch.setattr(stages, "rewrite", broken)
    server.script = [ANSWER]
    with open_app(indexed, server, monkeypatch, tmp_path, query_rewrite=True) as app:
        answer = app.ask("一人有限责任公司的股东承担什么责任？")
        row, = rows(app, answer.query_id, "rewrite")
    assert (row["status"], row["error"]) == ("error", "RuntimeError: a bug in the rewrite")
    assert "searched as asked" in row["estimate_note"]
    assert answer.mode == "llm" and answer.contexts and answer.levers == ()


def test_a_runaway_reply_is_cut_before_it_reaches_the_query(server):
    from rag_app.models.llm import build_rewrite_model
    from rag_app.query import stages
    from rag_app.query.pipeline import QueryConfig

    from types import SimpleNamespace

    server.script = [Reply(content="劳动合同 " * 400)]
    chat = build_rewrite_model(SimpleNamespace(llm_model="gpt-4o-mini", openai_api_key="sk-test",
                                               openai_base_url=server.base_url, query_rewrite_timeout_s=5,
                                               query_rewrite_max_tokens=128))
    words, usages = stages.rewrite("辞退要赔钱吗", config=QueryConfig(query_rewrite=True), chat_model=lambda: chat)
    assert len(words) == stages.REWRITE_MAX_CHARS and words.startswith("劳动合同 劳动合同")
    assert [u.stage for u in usages] == ["rewrite"]


def test_rag_eval_refuses_the_rewrite_without_the_llm():
    from pathlib import Path

    from rag_app.evaluation.harness import EvalSpec, query_config
    from rag_app.query.pipeline import QueryConfig

    class App:
        def query_config(self) -> QueryConfig:
            return QueryConfig(retrieval_levers="none")

    spec = EvalSpec(qa=Path("qa.jsonl"), corpus=Path("corpus"), chunkers=["legal"])
    with pytest.raises(ConfigError, match=r"bm25\+rewrite.*--llm"):
        query_config(App(), spec, "bm25+rewrite", 20)
    assert query_config(App(), EvalSpec(qa=Path("qa.jsonl"), corpus=Path("corpus"), chunkers=["legal"], use_llm=True),
                        "bm25+rewrite", 20).rewrites
    assert not query_config(App(), spec, "bm25+charge", 20).rewrites
