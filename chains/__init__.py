"""The LangChain runnables that wire the stages (the work itself is in rag_app/): `rag` is the query chain
([rewrite ->] embed_query -> retrieve -> rerank -> generate, each a named stage the CostTracer keys on) and
`ingestion` the indexing chain (parse_chunk -> embed_documents -> embed_rescore), traced like a query."""

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from chains.ingestion import run_ingestion
    from chains.rag import build_rag

__all__ = ["build_rag", "run_ingestion"]

if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)
