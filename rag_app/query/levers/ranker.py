"""ranker: a model learned from questions with gold spans (`rag train-ranker`) orders the union of every
candidate view (rag_app/query/views.py, rag_app/query/ranker.py) instead of RRF; off unless named.
stages.retrieve runs it in place of this search; the row names its version."""
from __future__ import annotations

from rag_app.query.levers._contract import Lever
from rag_app.query.knobs import QueryKnobs


class Ranker(Lever, name="ranker", stage="outside", order=20):
    def label(self, params: QueryKnobs, version: str | None = None) -> str:
        return f"ranker({version})" if version else self.name


LEVER = Ranker()
