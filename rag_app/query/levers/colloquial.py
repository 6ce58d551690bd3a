"""colloquial: everyday words -> the statutes' words (房东 -> 出租人), from a curated table
(rag_app/query/colloquial.py), added to the BM25 query at a lower weight. Acts only on questions that
use a word of the table."""
from __future__ import annotations

from collections.abc import Sequence

from rag_app.query import colloquial
from rag_app.query.levers._contract import Lever, SearchRequest
from rag_app.query.levers._terms import Terms, query_terms
from rag_app.store import Hit


# after expand: it leaves out what the query (with expand's terms) already has
class Colloquial(Lever, name="colloquial", stage="terms", order=20):
    def acts(self, question: str) -> bool:
        return bool(colloquial.expansion_terms(question, query_terms(question), 1.0))

    def more_terms(self, req: SearchRequest, terms: Terms, feedback: Sequence[Hit]) -> Terms:
        return colloquial.expansion_terms(req.question, terms, req.params.colloquial_weight)


LEVER = Colloquial()
