"""rewrite: the configured LLM turns an everyday question into the statutes' terms and likely law names
(prompts/rewrite/, stages.rewrite; off unless RAG_QUERY_REWRITE=1 or named). Its words are added to the
user's, never in place of them: to the BM25 query at a lower weight, and to the text the dense legs
embed. A failed or timed-out rewrite leaves the question as asked."""
from __future__ import annotations

from collections.abc import Sequence

from rag_app.query.levers._contract import Lever, SearchRequest
from rag_app.query.levers._terms import Terms, plain_word
from rag_app.store import Hit
from rag_app.text import sparse


def rewrite_terms(rewritten: str, query: Terms, weight: float) -> Terms:
    """The rewrite's words (not bigrams, article keys or stems) that the query lacks, at `weight`."""
    return {t: weight for t in sparse.tokenize(sparse.normalize_query(rewritten))
            if plain_word(t) and t not in query}


# after expand and colloquial: it adds only what the user's words and theirs lack
class Rewrite(Lever, name="rewrite", stage="terms", order=30):
    def more_terms(self, req: SearchRequest, terms: Terms, feedback: Sequence[Hit]) -> Terms:
        return rewrite_terms(req.rewritten, terms, req.params.rewrite_weight)


LEVER = Rewrite()
