"""Imported once by the parse workers' forkserver: every per-file child forks with the chunkers
imported and jieba's dictionary already loaded (a second per file otherwise)."""
from rag_app import sparse
from rag_app.chunking import registry  # noqa: F401 - unpickling a chunker in the child needs it

sparse.warm()
