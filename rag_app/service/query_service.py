"""The HTTP query policy in one place, callable without HTTP: the key's models, then the key's rate limit
(RateLimited: the 429; the request's LLM tokens reserved at their ceiling), then the answer cache (a hit
bills nothing and spends no budget), then the budgets, the key's own among them (admission, or
OverBudget: the 429, and the request leaves the key's window), then the query path of the variant the
request is routed to, over the collection the key may read (its real LLM tokens settle the reservation),
then the cache is filled. `/v1/ask` (JSON and SSE) and
`/v1/chat/completions` (JSON and SSE) all call `QueryService.answer`; routes only parse and present."""
from __future__ import annotations

import time
from decimal import Decimal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_app.access.keys import OPEN, Principal
from rag_app.access.rate import RateLimiter, Ticket
from rag_app.access.rights import check_models
from rag_app.models.attempts import utcnow
from rag_app.present.presenter import answer_payload
from rag_app.spend.answer_cache import AnswerCache, Cached, hit_payload, live_usage
from rag_app.spend.budgets import NANO, Budget, BudgetGate
from rag_app.spend.estimate import question_estimate
from rag_app.service.inputs import display_path
from rag_app.service.pool import Route, VariantPool
from rag_app.core.usage import StageUsage, totals
from rag_app.query.stages import REWRITE_STAGE
from tracing.ledger import queries_row


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
    collection: str | None = None  # None: RAG_COLLECTION
    principal: Principal = OPEN  # the key that asked: its models, rate limits and budget apply
    model: str | None = None  # the chat request's `model` (a key's model list may name it)


def key_budget(p: Principal) -> tuple[Budget, ...]:
    """An issued key's own budget, as a hard budget on its name."""
    if p.name is None or p.budget_nano_usd is None:
        return ()
    return (Budget("key", p.name, p.budget_period or "month", Decimal(p.budget_nano_usd) / NANO, "USD", True, ()),)


LLM_STAGES = ("generate", REWRITE_STAGE)


class QueryService:
    def __init__(self, pool: Callable[[], VariantPool], gate: BudgetGate, cache: AnswerCache | None, data_dir: Path,
                 rate: RateLimiter | None = None):
        self.pool, self.gate, self.cache, self.data_dir, self.rate = pool, gate, cache, data_dir, rate

    def answer(self, req: QueryRequest, *, callbacks: Sequence[Any] = (),
               admitted: Callable[[str, str | None], None] | None = None) -> tuple[dict, Route]:
        """(answer payload, route). `admitted(query_id, variant)` is called once the budgets let the
        query through (a streamed query starts its response then); a refusal raises OverBudget."""
        p = self.pool()
        route = p.route(req.user_id, req.session_id, req.key_id, req.variant, req.collection)
        app_ = p.app_for(route.app_variant, route.collection)
        check_models(req.principal, (req.model, route.variant, app_.settings.llm_model))
        # the largest bill this question can run up on the model its variant calls: what a key's tpm and
        # a hard budget reserve for it before any work
        estimate = question_estimate(req.question, app_.settings, app_.prices, use_llm=app_.uses_llm)
        ticket = None
        if self.rate is not None:  # the key's window: its LLM tokens reserved at their ceiling, settled below
            ticket = self.rate.admit(req.principal, estimate.tokens if req.principal.tpm is not None else 0)
        key = self._key(p, route, app_, req) if self.cache is not None else None
        try:
            hit = self._cached(p, route, app_, req, key)
        except BaseException:
            self._release(ticket)
            raise
        if hit is not None:
            self._settle(ticket, 0)  # a hit calls no model
            return hit
        try:
            self.gate.admit(route.query_id, {"key": req.key_id, "user": req.user_id, "variant": route.variant},
                            req.question, key_budget(req.principal), estimate=estimate)
        except BaseException:
            self._release(ticket)  # refused by a budget: it never began, it leaves the key's window
            raise
        if admitted is not None:
            admitted(route.query_id, route.variant)
        answer = p.run(route, req.question, req.scope, callbacks)  # raising: its reservation stands
        self._settle(ticket, llm_tokens(answer.usage))
        payload = answer_payload(answer, doc_path=lambda doc: display_path(doc, self.data_dir))
        if self.cache is not None and key is not None and not answer.incomplete:
            self.cache.put(app_.store, app_.settings.collection, key,
                           Cached(payload, totals(answer.usage).known_cost_nano, live_usage(answer.usage),
                                  req.user_id))
        return {**payload, "cache_hit": False, "saved_cost_usd": None}, route

    @staticmethod
    def _key(p: VariantPool, route: Route, app_: Any, req: QueryRequest) -> str:
        return AnswerCache.key(req.question, req.scope, collection=app_.settings.collection, variant=route.variant,
                              experiment=route.experiment, arm=route.assignment.arm if route.assignment else None,
                              settings={"overrides": p.config.variants.get(route.app_variant, {}),
                                        "prompt_version": app_.settings.prompt_version,
                                        "llm_model": app_.settings.llm_model})

    def _cached(self, p: VariantPool, route: Route, app_: Any, req: QueryRequest,
                key: str | None) -> tuple[dict, Route] | None:
        """A cache hit's payload (its query row written), or None. A hit bills nothing and spends no
        budget; it names the query it was first answered for only to that query's user or an admin."""
        if self.cache is None or key is None:
            return None
        started, t0 = utcnow(), time.perf_counter()
        hit = self.cache.get(app_.store, app_.settings.collection, key)
        if hit is None:
            return None
        saved = hit.saving(app_.pricer, started)  # a live answer's price now, not the original's
        p.base.writer.put("queries", queries_row(route.query_id, "query", "ok", started, t0, **{
            "question": req.question, "mode": hit.payload["mode"], "variant": route.variant,
            "experiment": route.experiment, **route.extra,
            # origin `cache`: an experiment's comparison reads live runs of its arms, never hits
            "origin": "cache", "cache_hit": 1, "saved_cost_nano_usd": saved.nano,
            "cached_from": hit.payload["query_id"], "price_warning": saved.warning}))
        mine = req.principal.admin or hit.user == req.user_id
        return hit_payload(hit, route.query_id, saved.nano, saved.warning, show_origin=mine), route

    def _settle(self, ticket: Ticket | None, tokens: int) -> None:
        if self.rate is not None:
            self.rate.settle(ticket, tokens)

    def _release(self, ticket: Ticket | None) -> None:
        if self.rate is not None:
            self.rate.release(ticket)


def llm_tokens(usages: Sequence[StageUsage]) -> int:
    """What a query's LLM calls sent and received (the answer and the rewrite, every attempt made): what a
    key's tokens-per-minute limit counts."""
    return sum(u.input_tokens + u.output_tokens for u in usages
               if u.stage in LLM_STAGES and u.status != "skipped")
