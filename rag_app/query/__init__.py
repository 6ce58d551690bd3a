"""One question's path, as plain functions and values: what a query needs (`pipeline`), its stages
(`stages`: embed, retrieve, rerank, generate, each returning its usage), the store's legs fused
(`retrieval`), the retrieval levers (`levers`, `charges`, `colloquial`), which documents a question is
about (`scope`), the token-budgeted context (`context`), what a reader is shown of a passage
(`excerpt`) and the extractive answer and citations (`answer`). Every setting of the path is declared
once in `knobs`. The learned parts: the candidate `views` a question is proposed by, the `ranker` that
orders their union, the query `adapter` that moves an everyday question nearer its statute, and `blas`
(one BLAS thread for their small products). The chain in chains/rag.py wires them.

It never imports experiments, spend, the CLI, the service or tracing (tests/unit/codebase/test_layering.py).
Other packages import from this face (the names under `TYPE_CHECKING`, looked up on first use
by rag_app/core/face.py); inside the package, modules import each other directly."""

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from rag_app.query.adapter import (adapt, adapter_path, load_adapter, query_adapter, refusal,
                                       save_adapter, trained_on)
    from rag_app.query.answer import citation_for, format_context, marked_contexts, passage_label
    from rag_app.query.blas import one_thread
    from rag_app.query.charges import charge_index
    from rag_app.query.knobs import QueryKnobs, lever_overrides
    from rag_app.query.pipeline import Pipeline, QueryConfig
    from rag_app.query.ranker import FEATURES, FEATURE_VERSION, doc_lengths, features, pool_of, predict
    from rag_app.query.retrieval import legs_for
    from rag_app.query.scope import Scope, catalogue
    from rag_app.query.stages import REWRITE_STAGE, Retrieved, check_rewrite_prompt
    from rag_app.query.views import candidate_views


if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)

__all__ = ["FEATURES", "FEATURE_VERSION", "REWRITE_STAGE", "Pipeline", "QueryConfig", "QueryKnobs",
           "Retrieved", "Scope", "adapt", "adapter_path", "candidate_views", "catalogue", "charge_index",
           "check_rewrite_prompt", "citation_for", "doc_lengths", "features", "format_context", "legs_for",
           "lever_overrides", "load_adapter", "marked_contexts", "one_thread", "passage_label", "pool_of",
           "predict", "query_adapter", "refusal", "save_adapter", "trained_on"]
