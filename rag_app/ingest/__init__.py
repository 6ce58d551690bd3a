"""Files in, chunks with vectors in the store out: loaders turn a file into exact text with blocks,
offsets and pages (`loaders`, `pdftext`, `tables`, `textdecode`, `unstructured_setup`, run isolated by
`sandbox`), `indexing` takes each file through chunking (rag_app/chunking/), embedding and the store with
one outcome per file (its parse workers start from `worker_preload`), and `rescore_pass` makes the rescore lever's vectors once at ingest.

Other packages import from this face (the names under `TYPE_CHECKING`, looked up on first use
by rag_app/core/face.py); inside the package, modules import each other directly."""

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from rag_app.ingest.indexing import (FileOutcome, IngestReport, Progress, check_collection,
                                         decide_collection, expand_paths, index_documents, opened_collection,
                                         parse_and_chunk, stored_versions, unchanged_by_hash)
    from rag_app.ingest.loaders import FORMATS, load_document
    from rag_app.ingest.rescore_pass import fill_rescore_vectors
    from rag_app.ingest.sandbox import prepare_limited


if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)

__all__ = ["FORMATS", "FileOutcome", "IngestReport", "Progress", "check_collection", "decide_collection",
           "expand_paths", "fill_rescore_vectors", "index_documents", "load_document", "opened_collection",
           "parse_and_chunk", "prepare_limited", "stored_versions", "unchanged_by_hash"]
