"""charge: a case description that names its charges (罪名:故意伤害) gets the 刑法 chunk that defines
each charge first (rag_app/query/charges.py). Acts only on questions that name a charge."""
from __future__ import annotations

from rag_app.query import charges
from rag_app.query.levers._contract import Lever, Ranking, SearchRequest
from rag_app.query.retrieval import put_first


class Charge(Lever, name="charge", stage="ranking", order=20):  # last: what it puts first stays first
    def acts(self, question: str) -> bool:
        return bool(charges.named_charges(question))

    def rerank(self, req: SearchRequest, r: Ranking) -> Ranking:
        if not self.acts(req.question):  # most questions: no index needed
            return r
        index = charges.charge_index(req.store, req.info.name)
        first = charges.charge_chunk_ids(req.question, index)
        if not first:
            return r
        return Ranking(put_first(r.ordered, first), {**r.payloads, **{c: index.payloads[c] for c in first}})


LEVER = Charge()
