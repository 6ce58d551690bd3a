"""Chunkers: parsed document -> chunks with exact offsets.

doctype.py classifies each document (statute / contract / other; overridable per file);
routing.py sends it to the chunker for its type and records the type on every chunk;
structure.py finds statute units (编/章/节 headings, 第X条 articles, 附件, tables, items);
contract.py finds contract clauses and list items (1.1, (a), (ii), Section 5, recitals) and their paths;
semantic.py splits long unstructured spans at sentence ends where topic shifts;
merge.py packs statute units toward a token target without crossing 编/章 boundaries.
legal.py composes the statute rules; registry.py builds `legal` (routed: contracts to contract.py,
everything else to the statute rules) and the single-strategy chunkers; baselines.py holds the chunkers
users would otherwise pick, measured in the same harness.
"""

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from rag_app.chunking.doctype import overridden_type, parse_override
    from rag_app.chunking.legal import TABLE_PREFIX
    from rag_app.chunking.registry import CHUNKERS, Chunker, NEEDS_EMBEDDINGS, build_chunker
    from rag_app.chunking.structure import ARTICLE_START

__all__ = ["ARTICLE_START", "CHUNKERS", "NEEDS_EMBEDDINGS", "TABLE_PREFIX", "Chunker", "build_chunker",
           "overridden_type", "parse_override"]

if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)
