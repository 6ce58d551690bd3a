"""One question's path, as plain functions and values: what a query needs (`pipeline`), its stages
(`stages`: embed, retrieve, rerank, generate, each returning its usage), the store's legs fused
(`retrieval`), the retrieval levers (`levers`, `charges`, `colloquial`), which documents a question is
about (`scope`), the token-budgeted context (`context`), what a reader is shown of a passage
(`excerpt`) and the extractive answer and citations (`answer`). The chain in chains/rag.py wires them.

It never imports experiments, spend, the CLI, the service or tracing (tests/unit/test_layering.py).
Import the module you need; this file only names them."""

__all__ = ["answer", "charges", "colloquial", "context", "excerpt", "levers", "pipeline", "retrieval",
           "scope", "stages"]
