"""The HTTP query policy in one place, callable without HTTP: the answer cache first (a hit bills
nothing and spends no budget), then the budgets (admission, or OverBudget: the 429), then the query
path of the variant the request is routed to, then the cache is filled. `/v1/ask` (JSON and SSE) and
`/v1/chat/completions` (JSON and SSE) all call `QueryService.answer`; routes only parse and present."""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_app.models.attempts import utcnow
from rag_app.present.presenter import answer_payload
from rag_app.spend.answer_cache import AnswerCache, Cached, hit_payload, live_usage
from rag_app.spend.budgets import BudgetGate
from rag_app.service.inputs import display_path
from rag_app.service.pool import Route, VariantPool
from rag_app.core.usage import totals


@dataclass(frozen=True)
class QueryRequest:
    """One question as a front door received it (the user and session from the body, the key from
    the bearer token, a variant when a chat `model` names one)."""

    question: str
    user_id: str | None = None
    session_id: str | None = None
    scope: Any = None
    key_id: str | None = None
    variant: str | None = None


class QueryService:
    def __init__(self, pool: Callable[[], VariantPool], gate: BudgetGate, cache: AnswerCache | None, data_dir: Path):
        self.pool, self.gate, self.cache, self.data_dir = pool, gate, cache, data_dir

    def answer(self, req: QueryRequest, *, callbacks: Sequence[Any] = (),
               admitted: Callable[[str, str | None], None] | None = None) -> tuple[dict, Route]:
        """(answer payload, route). `admitted(query_id, variant)` is called once the budgets let the
        query through (a streamed query starts its response then); a refusal raises OverBudget."""
        p = self.pool()
        route = p.route(req.user_id, req.session_id, req.key_id, req.variant)
        app_ = p.app_for(route.app_variant)
        store, collection = app_.store, app_.settings.collection
        key = None
        if self.cache is not None:
            started, t0 = utcnow(), time.perf_counter()
            key = self.cache.key(req.question, req.scope, collection=collection, variant=route.variant,
                                 experiment=route.experiment, arm=route.assignment.arm if route.assignment else None,
                                 settings={"overrides": p.config.variants.get(route.app_variant, {}),
                                           "prompt_version": app_.settings.prompt_version,
                                           "llm_model": app_.settings.llm_model})
            hit = self.cache.get(store, collection, key)
            if hit is not None:
                saved = hit.saving_at(app_.pricer, started)  # a live answer's price now, not the original's
                p.base.writer.put("queries", {
                    "query_id": route.query_id, "kind": "query", "question": req.question, "mode": hit.payload["mode"],
                    "status": "ok", "variant": route.variant, "experiment": route.experiment, "started_at": started,
                    "ended_at": utcnow(), "latency_ms": round((time.perf_counter() - t0) * 1000, 3), **route.extra,
                    # origin `cache`: an experiment's comparison reads live runs of its arms, never hits
                    "origin": "cache", "cache_hit": 1, "saved_cost_nano_usd": saved})
                return hit_payload(hit, route.query_id, saved), route
        self.gate.admit(route.query_id, {"key": req.key_id, "user": req.user_id, "variant": route.variant}, req.question)
        if admitted is not None:
            admitted(route.query_id, route.variant)
        answer = p.run(route, req.question, req.scope, callbacks)
        payload = answer_payload(answer, doc_path=lambda doc: display_path(doc, self.data_dir))
        if self.cache is not None and key is not None and not answer.incomplete:
            self.cache.put(store, collection, key, Cached(payload, totals(answer.usage).known_cost_nano,
                                                          live_usage(answer.usage)))
        return {**payload, "cache_hit": False, "saved_cost_usd": None}, route
