"""The HTTP rerank stage against a real scripted rerank server on 127.0.0.1 (tests/fakes)."""
from __future__ import annotations

import sqlite3

import pytest

from rag_app.rerank import rerank
from rag_app.rerank_http import HttpReranker, RerankHTTPError
from rag_app.tokens import count_tokens
from rag_app.types import Chunk, ScoredChunk
from tests.conftest import ingested_app
from tests.fakes.rerank_server import Fail, FakeRerank, Usage

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


def test_scores_follow_the_server_and_jina_usage_is_priced_per_token():
    with FakeRerank() as fake:
        fake.script = [Usage("jina", total_tokens=2500)]
        rr = HttpReranker(fake.url, "jina-reranker-v2", api_key="k-1", price_usd="0.02", price_unit="1m_tokens")
        res = rerank("一人公司", cands(["无关的条文", "一人有限责任公司", "公司"]), rr, top_n=2)
    assert res.status == "ok" and [c.chunk.chunk_id for c in res.contexts] == ["c1", "c2"]
    assert fake.requests[0] == {"model": "jina-reranker-v2", "query": "一人公司", "top_n": 3, "return_documents": False,
                                "documents": ["无关的条文", "一人有限责任公司", "公司"]}
    assert fake.headers[0]["Authorization"] == "Bearer k-1"
    assert res.tokens == 2500
    assert res.billing["billed_cost_nano"] == 50_000  # 2,500 tokens x $0.02 / 1M = $0.00005
    assert res.billing["price_source"] == "rate" and res.billing["usage_note"] is None


def test_cohere_search_units_are_billed_per_search_and_no_usage_is_estimated():
    with FakeRerank() as fake:
        fake.script = [Usage("cohere", search_units=2), Usage("none")]
        rr = HttpReranker(fake.url, "rerank-v3.5", price_usd="0.002", price_unit="search")
        first = rerank("公司", cands(["公司", "股东"]), rr, top_n=2)
        second = rerank("公司", cands(["公司", "股东"]), rr, top_n=2)
    assert first.billing["billed_cost_nano"] == 4_000_000 and first.billing["search_units"] == 2
    assert second.billing["usage_note"] == "estimated" and second.tokens > 0
    assert second.billing["billed_cost_nano"] == 2_000_000


def test_no_price_is_unpriced_never_zero_and_bad_settings_are_named():
    with FakeRerank() as fake:
        res = rerank("公司", cands(["公司"]), HttpReranker(fake.url, "m"), top_n=1)
    assert res.billing["billed_cost_nano"] is None and res.billing["price_source"] == "unpriced"
    with pytest.raises(RerankHTTPError, match="RAG_RERANK_PRICE_UNIT"):
        HttpReranker("http://127.0.0.1:1/v1/rerank", "m", price_unit="per-call")
    with pytest.raises(RerankHTTPError, match="RAG_RERANK_PRICE_USD"):
        HttpReranker("http://127.0.0.1:1/v1/rerank", "m", price_usd="cheap")


def test_a_failing_endpoint_keeps_retrieval_order_and_says_why():
    with FakeRerank() as fake:
        fake.script = [Fail(500)]
        res = rerank("公司", cands(["股东", "公司"]), HttpReranker(fake.url, "m"), top_n=2)
    assert res.status == "error" and "500" in res.note
    assert [c.chunk.chunk_id for c in res.contexts] == ["c0", "c1"]


def _rerank_row(app, qid):
    app.writer.flush()
    conn = sqlite3.connect(app.settings.ledger_path)
    conn.row_factory = sqlite3.Row
    row = dict(conn.execute("SELECT * FROM stage_calls WHERE query_id = ? AND stage = 'rerank'", (qid,)).fetchone())
    conn.close()
    return row


def test_the_rerank_stage_writes_what_the_provider_bills_to_the_ledger(tmp_path):
    with FakeRerank() as fake:
        fake.script = [Usage("jina", total_tokens=777), Fail(503)]
        with ingested_app(tmp_path, {"示例公司法.md": LAW}, retriever="bm25", rerank_url=fake.url,
                          rerank_model="bge-reranker-v2-m3", rerank_price_usd="0.002",
                          rerank_price_unit="search") as app:
            answer = app.ask("一人有限责任公司是什么？", query_id="q-http-1")
            ok = _rerank_row(app, "q-http-1")
            app.ask("一人有限责任公司是什么？", query_id="q-http-2")
            failed = _rerank_row(app, "q-http-2")
    assert answer.contexts and fake.requests[0]["model"] == "bge-reranker-v2-m3"
    assert (ok["status"], ok["model"], ok["input_tokens"], ok["cost_nano_usd"]) == ("ok", "bge-reranker-v2-m3", 777, 2_000_000)
    assert ok["price_source"] == "rate" and "0.002" in ok["price_version"]
    assert failed["status"] == "error" and "503" in failed["error"]
