"""A question's BM25 terms and their sparse vector, as the index tokenises them."""
from __future__ import annotations

from functools import lru_cache

from rag_app.text import sparse

Terms = dict[str, float]  # BM25 token -> weight in the query


def query_terms(question: str) -> Terms:
    return dict.fromkeys(_question_tokens(question), 1.0)


@lru_cache(maxsize=256)
def _question_tokens(question: str) -> tuple[str, ...]:
    """A question's BM25 tokens, once: the levers that check whether they act ask for them too."""
    return tuple(sparse.tokenize(sparse.normalize_query(question)))


def to_vector(terms: Terms) -> tuple[list[int], list[float]]:
    merged: dict[int, float] = {}
    for tok, w in terms.items():
        idx = sparse.token_index(tok)
        merged[idx] = merged.get(idx, 0.0) + w
    return list(merged), list(merged.values())


def plain_word(token: str) -> bool:
    """A word of the text, not a bigram, an article key or a stem (what expansions may add or match)."""
    return not token.startswith(("~", "§", sparse.STEM))
