"""Files in, chunks with vectors in the store out: loaders turn a file into exact text with blocks,
offsets and pages (`loaders`, `pdftext`, `tables`, `textdecode`, `unstructured_setup`, run isolated by
`sandbox`), `indexing` takes each file through chunking (rag_app/chunking/), embedding and the store with
one outcome per file, and `rescore_pass` makes the rescore lever's vectors once at ingest.

Import the module you need; this file only names them."""

__all__ = ["indexing", "loaders", "pdftext", "rescore_pass", "sandbox", "tables", "textdecode",
           "unstructured_setup", "worker_preload"]
