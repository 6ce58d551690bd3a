"""The levers' settings, one frozen value (RAG_* settings and `rag eval --lever-param` fill it)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LeverParams:
    """Defaults fixed before measuring; rescore's depth and weight were compared on `tune`
    (docs/evaluation-and-levers.md, "Quality per prompt token")."""

    depth: int = 50
    rescore_model: str = "e5-onnx"
    prf_docs: int = 3
    prf_terms: int = 12
    prf_weight: float = 0.3
    law_weight: float = 0.5
    law_top_chunks: int = 3
    expand_min_overlap: int = 2
    expand_min_share: float = 0.3
    expand_weight: float = 0.6
    rescore_weight: float = 1.0
    rescore_depth: int = 20  # candidates the dense leg embeds (50 was worse on tune); cached on disk per text
    rescore_fusion: str = "rrf"  # rrf | linear (min-max scaled scores, rescore_alpha on the dense side)
    rescore_alpha: float = 0.5
    colloquial_weight: float = 0.5
    wide_depth: int = 20  # the whole-corpus dense leg's nearest chunks that join the rescore pool
    # a longer question is embedded as its head and tail (0: whole). 160 changed no ranking on validate and
    # recall within 1,000 by +0.001 [+0.000, +0.003] on tune; 64 lost within 500 on validate (-0.005)
    rescore_query_chars: int = 160
    # the rewrite lever's words, beside the user's (as colloquial's: they may pull the statute's wording into
    # the candidates without outweighing what the user wrote; not measurable offline: no LLM here)
    rewrite_weight: float = 0.5
    ranker: str = ""  # the learned ranker's artefact (`rag train-ranker`; RAG_RANKER), read by the `ranker` lever
    # the query adapter's artefact (RAG_QUERY_ADAPTER; '' none): moves the question's vector in the rescore
    # embedder's space before rescore, wide and the ranker read it (rag_app/query/adapter.py)
    query_adapter: str = ""
    # what rescore and wide read of a chunk: (article) its best article's vector, or its own; RAG_RESCORE_UNIT
    rescore_unit: str = "article"

    def __post_init__(self) -> None:
        if self.rescore_fusion not in ("rrf", "linear"):
            raise ValueError(f"rescore_fusion={self.rescore_fusion!r}: use rrf or linear")
        if self.rescore_unit not in ("chunk", "article"):
            raise ValueError(f"rescore_unit={self.rescore_unit!r}: use chunk or article")
