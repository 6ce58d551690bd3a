"""prf: pseudo-relevance feedback. Words shared by the top BM25 chunks are added to the query at a
lower weight (the engine applies IDF, so words common in the corpus stay cheap), and BM25 searches again."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rag_app.query.levers._contract import Lever, SearchRequest
from rag_app.query.levers._terms import Terms, plain_word
from rag_app.store import Hit
from rag_app.text import sparse


def prf_terms(query: Terms, feedback: list[str], n_terms: int, weight: float) -> Terms:
    """Words (not bigrams, not article keys) in >= 2 feedback texts and not in the query."""
    df = Counter(t for text in feedback for t in set(sparse.tokenize(text)))
    picked = [t for t, c in sorted(df.items(), key=lambda kv: (-kv[1], kv[0]))
              if c >= 2 and t not in query and plain_word(t) and len(t) >= 2][:n_terms]
    return {t: weight * df[t] / len(feedback) for t in picked}


class Prf(Lever, name="prf", stage="feedback", order=10):
    def more_terms(self, req: SearchRequest, terms: Terms, feedback: Sequence[Hit]) -> Terms:
        p = req.params
        return prf_terms(terms, [h.chunk.indexed_text() for h in feedback[: p.prf_docs]], p.prf_terms, p.prf_weight)


LEVER = Prf()
