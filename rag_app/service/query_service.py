"""The one query service every front door calls, callable without HTTP: `QueryService.answer(QueryRequest)
-> QueryResult`. `/v1/ask` (JSON and SSE), `/v1/chat/completions` (JSON and SSE) and `rag ask`
(rag_app/service/shell.py) all build a `QueryRequest`, call `answer` and present the `QueryResult`; the
routes and the command only parse and present.

A question is routed (its variant and collection, its app), its largest bill estimated
(rag_app/spend/estimate.py: what the key's tpm and a hard budget reserve), then it passes admission, the
named sequence of steps in rag_app/service/admission/ (models -> rate -> cache -> budget -> run -> settle),
which refuses it (Forbidden, RateLimited, OverBudget, LedgerDown), serves it from the answer cache, or
answers it."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rag_app.access import RateLimiter
from rag_app.present import display_path
from rag_app.service.admission import (Admission, QueryRequest, QueryResult, Router, key_budget, llm_tokens, steps,
                                       walk)
from rag_app.spend import AnswerCache
from rag_app.spend import BudgetGate
from rag_app.spend import question_estimate

__all__ = ["QueryRequest", "QueryResult", "QueryService", "key_budget", "llm_tokens"]


class QueryService:
    """`pool()`: the router questions go to (the service's VariantPool; the shell's one app). `data_dir`:
    citations' files are shown relative to it (None: as stored, as `rag ask` shows them)."""

    def __init__(self, pool: Callable[[], Router], gate: BudgetGate, cache: AnswerCache | None,
                 data_dir: Path | None, rate: RateLimiter | None = None):
        self.pool, self.gate, self.cache, self.data_dir, self.rate = pool, gate, cache, data_dir, rate
        doc_path: Callable[[str], str] = str if data_dir is None else (lambda doc: display_path(doc, data_dir))
        self.steps = steps(gate, cache, rate, doc_path)

    def answer(self, req: QueryRequest, *, callbacks: Sequence[Any] = (),
               admitted: Callable[[str, str | None], None] | None = None) -> QueryResult:
        """The question answered, or refused by a step (its exception). `admitted(query_id, variant)` is
        called once the question may spend (a streamed query starts its response then); `callbacks`: more
        LangChain handlers for the run (a stream's token sink)."""
        router = self.pool()
        route = router.route(req.user_id, req.session_id, req.key_id, req.variant, req.collection)
        app_ = router.app_for(route.app_variant, route.collection)
        # the largest bill this question can run up on the model its variant calls: what a key's tpm and
        # a hard budget reserve for it before any work
        estimate = question_estimate(req.question, app_.settings, app_.prices, use_llm=app_.uses_llm)
        return walk(self.steps, Admission(req, router, route, app_, estimate, callbacks, admitted))
