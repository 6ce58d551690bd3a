"""Data files shipped with the package: the `rag` help text (cli_help.txt, printed by rag_app/cli/entry.py),
the colloquial lever's table of everyday words (colloquial_zh.tsv, read by rag_app/query/colloquial.py), and the
bundled query adapter (adapters/adapter-<version>.npz with its training command, data hashes and metrics in the
.json beside it; RAG_QUERY_ADAPTER=auto, rag_app/query/adapter.py)."""
