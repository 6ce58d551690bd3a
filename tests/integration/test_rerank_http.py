"""The HTTP rerank stage against a real scripted rerank server on 127.0.0.1 (tests/fakes)."""
from __future__ import annotations

import sqlite3
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from rag_app.config.settings import load_settings
from rag_app.core.errors import ConfigError
from rag_app.models.rerank import rerank_candidates
from rag_app.models.rerank_http import HttpReranker
from rag_app.text.tokens import count_tokens
from rag_app.core.types import Chunk, ScoredChunk
from tests.conftest import ingested_app
from tests.fakes.rerank_server import Fail, FakeRerank, Usage
from tracing.pricing import LedgerPricer
from tracing.pricing import PriceTable

LAW = """# 中华人民共和国示例公司法
<!-- INFO END -->
## 第一章 总则
第一条 为了规范公司的组织和行为，保护公司、股东和债权人的合法权益，制定本法。
第二条 本法所称公司是指依照本法在中国境内设立的有限责任公司和股份有限公司。
第三条 有限责任公司的股东以其认缴的出资额为限对公司承担责任。
## 第二章 一人有限责任公司
第五十七条 一人有限责任公司的设立和组织机构，适用本节规定。本法所称一人有限责任公司，是指只有一个自然人股东或者一个法人股东的有限责任公司。
"""


def cands(texts):
    return [ScoredChunk(Chunk("d", "/d.md", "法", t, i * 100, i * 100 + len(t), count_tokens(t), "legal", "2",
                              chunk_id=f"c{i}"), 1.0 / (i + 1), i + 1) for i, t in enumerate(texts)]


def priced(usage, price_usd=None, unit="search"):
    return LedgerPricer(PriceTable(), rerank_price_usd=price_usd, rerank_price_unit=unit).price(usage)


def test_scores_follow_the_server_and_jina_usage_is_priced_per_token():
    with FakeRerank() as fake:
        fake.script = [Usage("jina", total_tokens=2500)]
        rr = HttpReranker(fake.url, "jina-reranker-v2", api_key="k-1")
        ranked, usage = rerank_candidates("一人公司", cands(["无关的条文", "一人有限责任公司", "公司"]), rr, model=None)
    assert usage.status == "ok" and [c.chunk.chunk_id for c in ranked] == ["c1", "c2", "c0"]
    assert fake.requests[0] == {"model": "jina-reranker-v2", "query": "一人公司", "top_n": 3, "return_documents": False,
                                "documents": ["无关的条文", "一人有限责任公司", "公司"]}
    assert fake.headers[0]["Authorization"] == "Bearer k-1"
    assert (usage.input_tokens, usage.usage_source, usage.raw) == (2500, "provider", {"usage": {"total_tokens": 2500}})
    p = priced(usage, "0.02", "1m_tokens").price
    assert (p.cost_nano, p.shadow_nano, p.source) == (50_000, 50_000, "rate")  # 2,500 tokens x $0.02 / 1M = $0.00005


def test_cohere_search_units_are_billed_per_search_and_no_usage_is_estimated():
    with FakeRerank() as fake:
        fake.script = [Usage("cohere", search_units=2), Usage("none")]
        rr = HttpReranker(fake.url, "rerank-v3.5")
        _, first = rerank_candidates("公司", cands(["公司", "股东"]), rr, model=None)
        _, second = rerank_candidates("公司", cands(["公司", "股东"]), rr, model=None)
    assert priced(first, "0.002").price.cost_nano == 4_000_000 and first.search_units == 2
    assert second.usage_source == "estimated:cl100k_base" and second.input_tokens > 0
    assert priced(second, "0.002").price.cost_nano == 2_000_000


def test_no_price_is_unpriced_never_zero_and_bad_settings_are_named(monkeypatch):
    with FakeRerank() as fake:
        _, usage = rerank_candidates("公司", cands(["公司"]), HttpReranker(fake.url, "m"), model=None)
    p = priced(usage).price
    assert p.cost_nano is None and p.source == "unpriced"
    monkeypatch.setenv("RAG_RERANK_PRICE_UNIT", "per-call")
    with pytest.raises(ConfigError, match="RAG_RERANK_PRICE_UNIT"):
        load_settings(_env_file=None)
    monkeypatch.delenv("RAG_RERANK_PRICE_UNIT")
    monkeypatch.setenv("RAG_RERANK_PRICE_USD", "cheap")
    with pytest.raises(ConfigError, match="RAG_RERANK_PRICE_USD"):
        load_settings(_env_file=None)


def test_a_failing_endpoint_keeps_retrieval_order_and_says_why():
    with FakeRerank() as fake:
        fake.script = [Fail(500)]
        ranked, usage = rerank_candidates("公司", cands(["股东", "公司"]), HttpReranker(fake.url, "m"), model=None)
    assert usage.status == "error" and "500" in usage.error
    assert [c.chunk.chunk_id for c in ranked] == ["c0", "c1"]


def test_concurrent_reranks_book_their_own_tokens():
    """600 reranks on 16 threads, each asking about its own number of passages: each usage is its own
    request's count (the client used to keep the last call's billing on itself, and 9 in 600 booked
    another request's tokens)."""
    jobs = [("公司" * (1 + i % 7), [f"第{j}条 公司股东" for j in range(1 + i % 11)]) for i in range(600)]
    old = sys.getswitchinterval()
    with FakeRerank() as fake:
        fake.default = Usage("echo")
        rr = HttpReranker(fake.url, "m")
        sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show up, if any
        try:
            with ThreadPoolExecutor(max_workers=16) as pool:
                used = list(pool.map(lambda job: rr.score(*job)[1], jobs))
        finally:
            sys.setswitchinterval(old)
    assert [u.tokens for u in used] == [len(q) + sum(len(d) for d in docs) for q, docs in jobs]
    assert not [k for k, v in vars(rr).items() if k not in ("url", "model_name", "client")]  # nothing per call


def _rerank_row(app, qid):
    app.writer.flush()
    conn = sqlite3.connect(app.settings.ledger_path)
    conn.row_factory = sqlite3.Row
    row = dict(conn.execute("SELECT * FROM stage_calls WHERE query_id = ? AND stage = 'rerank'", (qid,)).fetchone())
    conn.close()
    return row


def test_the_rerank_stage_writes_what_the_provider_bills_to_the_ledger(tmp_path):
    with FakeRerank() as fake:
        fake.script = [Usage("jina", total_tokens=777), Fail(503), Usage("none")]
        with ingested_app(tmp_path, {"示例公司法.md": LAW}, retriever="bm25", rerank_url=fake.url,
                          rerank_model="bge-reranker-v2-m3", rerank_price_usd="0.002",
                          rerank_price_unit="search") as app:
            answer = app.ask("一人有限责任公司是什么？", query_id="q-http-1")
            ok = _rerank_row(app, "q-http-1")
            app.ask("一人有限责任公司是什么？", query_id="q-http-2")
            failed = _rerank_row(app, "q-http-2")
            app.ask("一人有限责任公司是什么？", query_id="q-http-3")
            estimated = _rerank_row(app, "q-http-3")
    assert answer.contexts and fake.requests[0]["model"] == "bge-reranker-v2-m3"
    assert (ok["status"], ok["model"], ok["input_tokens"], ok["cost_nano_usd"]) == ("ok", "bge-reranker-v2-m3", 777, 2_000_000)
    assert ok["price_source"] == "rate" and "0.002" in ok["price_version"] and ok["usage_source"] == "provider"
    assert failed["status"] == "error" and "503" in failed["error"]
    assert estimated["usage_source"] == "estimated:cl100k_base"  # the client's own count says so on the row
    rerank = next(u for u in answer.usage if u.stage == "rerank")
    assert rerank.price.cost_nano == ok["cost_nano_usd"]  # what the answer shows is what the ledger holds
