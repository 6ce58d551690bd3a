"""Data files shipped with the package: the `rag` help text (cli_help.txt, printed by rag_app/cli/entry.py)
and the colloquial lever's table of everyday words (colloquial_zh.tsv, read by rag_app/query/colloquial.py)."""
