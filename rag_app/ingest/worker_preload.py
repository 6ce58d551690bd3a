"""Imported once by the parse workers' forkserver: every per-file child forks with the chunkers
imported, jieba's dictionary and the cl100k table already loaded (each child otherwise loaded them
again: ~1 s for jieba, 0.26 s for cl100k, the first chunk's token count, on every file)."""
from rag_app.text import sparse, tokens
from rag_app.chunking import registry  # noqa: F401 - unpickling a chunker in the child needs it

sparse.warm()
tokens.encoding()
