"""Routing by document type: each document is classified once (doctype.py, overridable per file) and
chunked by the chunker for its type; every chunk records the type (`Chunk.doc_type`).

`rag_app.chunking.registry` builds every chunker as a RoutedChunker: the default `legal` routes
statutes and other text to the statute rules (LegalChunker) and contracts to the ContractChunker;
a single-strategy chunker (`fixed-512`, `recursive`, `contract`, `statute` ...) sends every type to
the same chunker and still records the type.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rag_app.chunking.doctype import doc_type_for
from rag_app.core import Chunk, ParsedDocument

ANY = "*"


class RoutedChunker:
    def __init__(self, name: str, version: str, routes: Mapping[str, Any],
                 overrides: Sequence[tuple[str, str]] = ()):
        """`routes`: doc type -> chunker, `"*"` for every type not listed. `overrides`: (glob, type)."""
        if ANY not in routes:
            raise ValueError("routes need a '*' entry for the types they do not name")
        self.name, self.version = name, version
        self.routes = dict(routes)
        self.overrides = tuple(overrides)

    def for_type(self, doc_type: str) -> Any:
        return self.routes.get(doc_type, self.routes[ANY])

    def chunk(self, doc: ParsedDocument) -> list[Chunk]:
        doc_type = doc_type_for(doc, self.overrides)
        return [replace(c, doc_type=doc_type) for c in self.for_type(doc_type).chunk(doc)]

    def describe(self) -> str:
        """'statute:legal@2 contract:contract@1 *:legal@2' for a routed one; the chunker's own name otherwise."""
        if len({id(c) for c in self.routes.values()}) == 1:
            return f"{self.name}@{self.version}"
        return " ".join(f"{t}:{c.name}@{c.version}" for t, c in self.routes.items())
