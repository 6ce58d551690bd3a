"""The one contract every lever keeps, and the typed request a search is asked with.

A search runs in five steps; each lever joins exactly one of them (its `stage`) and is asked for its
one hook there:

    terms       before the BM25 search:        terms in -> more terms out       (expand, colloquial)
    feedback    after a first BM25 search:     terms + its hits -> more terms   (prf; the leg is searched again)
    candidates  after the legs searched:       Candidates in -> more candidates or another ranking (wide, rescore)
    ranking     after the rankings are fused:  a Ranking in -> a new Ranking    (law, charge)
    outside     acts in stages.retrieve, before or instead of this search        (named, ranker)

Within a stage, levers run by `order`. Every lever also says whether it acts on a question (so a
ledger row names only what acted) and the label it adds to the retrieve row (`+rescore(e5-onnx)`).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

import numpy as np

from rag_app.core import Embedder
from rag_app.core import EmbedUsage
from rag_app.query.knobs import QueryKnobs
from rag_app.query.levers._embedder import QuestionVector
from rag_app.query.levers._terms import Terms
from rag_app.query.retrieval import legs_for
from rag_app.store import CollectionInfo, Hit, VectorStore, Where

Stage = Literal["terms", "feedback", "candidates", "ranking", "outside"]
STAGES: tuple[Stage, ...] = ("terms", "feedback", "candidates", "ranking", "outside")
Ordered = list[tuple[str, float]]  # (chunk id, score), best first
Payload = dict[str, Any]  # a chunk's payload in the store


def with_rewrite(question: str, rewritten: str) -> str:
    """The question with the rewrite's words added after it (never in place of it)."""
    return f"{question}\n{rewritten}" if rewritten else question


@dataclass(frozen=True)
class SearchRequest:
    """One question's search with its levers (what `search_with_usage` used to take as 15 arguments).

    `query_vector`: the collection's own dense vector of the question (None: no dense leg).
    `embeddings`: the rescore embedder (None: rescore and wide are left out).
    `rescore_wait_s`: how long rescore waits for its busy embedder before RescoreBusy (None: as long as it takes).
    `where`: a payload filter (a scope) that every leg applies and every lever's additions obey.
    `embed_missing`: see rescore.dense_order.
    `rewritten`: the words the configured LLM gave for the question (the rewrite lever), or ''."""

    store: VectorStore
    info: CollectionInfo
    question: str
    query_vector: list[float] | None
    mode: str
    levers: tuple[str, ...]
    top_k: int
    rrf_k: int = 60
    dense_weight: float = 1.0
    sparse_weight: float = 1.0
    cite: bool = True
    embeddings: Embedder | None = None
    params: QueryKnobs = field(default_factory=QueryKnobs)  # each lever reads its own settings here
    rescore_wait_s: float | None = None
    where: Where | None = None
    embed_missing: bool = True
    rewritten: str = ""

    @property
    def depth(self) -> int:
        """How deep each leg is searched."""
        return max(self.top_k * 2, self.params.depth)

    @property
    def search_text(self) -> str:
        """What a dense leg embeds: the question, and the rewrite's words after it when that lever is on."""
        return with_rewrite(self.question, self.rewritten if "rewrite" in self.levers else "")

    @property
    def dense_leg(self) -> bool:
        """Whether the collection's own dense leg is searched."""
        return legs_for(self.mode, self.info)[0] and self.query_vector is not None


@dataclass(frozen=True)
class Candidates:
    """What the legs found and the candidate levers added. `rankings[i]` is fused with `weights[i]`;
    the first `len(legs)` are the legs' own (their hits keep the engine's scores)."""

    legs: tuple[Sequence[Hit], ...] = ()
    rankings: tuple[Sequence[str], ...] = ()
    weights: tuple[float, ...] = ()
    payloads: Mapping[str, Payload] = field(default_factory=dict)
    proposed: tuple[str, ...] = ()  # chunks a lever found outside every leg (wide), for rescore to order
    # the question in the rescore embedder's space: made (wide), under way since before the search, or None
    question_vector: np.ndarray | QuestionVector | None = None
    fused: Ordered | None = None  # a lever's own fusion of the legs (rescore's linear fusion), in place of RRF
    embedded: EmbedUsage = EmbedUsage()  # what the levers embedded (the retrieve row shows it)

    def with_leg(self, hits: Sequence[Hit], weight: float) -> Candidates:
        ids = [h.payload["chunk_id"] for h in hits]
        return replace(self, legs=(*self.legs, hits), rankings=(*self.rankings, ids), weights=(*self.weights, weight),
                       payloads={**self.payloads, **{h.payload["chunk_id"]: h.payload for h in hits}})

    def with_ranking(self, ids: Sequence[str], weight: float) -> Candidates:
        return replace(self, rankings=(*self.rankings, ids), weights=(*self.weights, weight))


@dataclass(frozen=True)
class Ranking:
    """The fused ranking and the payload of every chunk in it."""

    ordered: Ordered
    payloads: Mapping[str, Payload]


class Lever:
    """One lever: its name (RAG_RETRIEVAL_LEVERS, `rag eval -r bm25+<name>`), its stage and the one hook
    of that stage. A lever module defines a subclass, `class Expand(Lever, name="expand", stage="terms",
    order=10)`, and `LEVER = Expand()`; the package finds it. `order`: where it runs among the levers of its
    stage (lower first)."""

    name: ClassVar[str]
    stage: ClassVar[Stage]
    order: ClassVar[int]

    def __init_subclass__(cls, *, name: str, stage: Stage, order: int, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.name, cls.stage, cls.order = name, stage, order

    def acts(self, question: str) -> bool:
        """Whether it changes anything for this question (the ledger row names only what acted)."""
        return True

    def label(self, params: QueryKnobs, version: str | None = None) -> str:
        """What the retrieve row says for it; `version`: of the model it loaded (the ranker's)."""
        return self.name

    def more_terms(self, req: SearchRequest, terms: Terms, feedback: Sequence[Hit]) -> Terms:
        """terms, feedback stages: terms to add (`feedback`: the first search's hits, feedback only)."""
        return {}

    def begin(self, req: SearchRequest, c: Candidates) -> Candidates:
        """candidates stage: before the legs search (to start work that can overlap it)."""
        return c

    def more(self, req: SearchRequest, c: Candidates) -> Candidates:
        """candidates stage: more candidates or another ranking."""
        return c

    def rerank(self, req: SearchRequest, r: Ranking) -> Ranking:
        """ranking stage: a new ranking."""
        return r
