"""Step `cache`: the answer cache (rag_app/spend/answer_cache.py). Reads the route, its app and the
request; adds `cache_key` and, on a hit, `result`: the cached answer under this query's id, its query row
written (origin `cache`, nothing billed, what a live answer would cost now as its saving). A hit spends no
budget and calls no model: the steps after this one see `result` and do no work. It names the query it
was first answered for only to that query's user or an admin. Takes nothing, so it undoes nothing; the
`settle` step fills the cache with a complete live answer."""
from __future__ import annotations

import time
from typing import Any, ClassVar

from rag_app.core import utcnow
from rag_app.service.admission.context import Admission, QueryResult
from rag_app.spend import AnswerCache, hit_payload
from tracing.ledger import queries_row


class ServeFromCache:
    name: ClassVar[str] = "cache"

    def __init__(self, cache: AnswerCache | None):
        self.cache = cache  # None: RAG_ANSWER_CACHE_SIZE=0

    def enter(self, ctx: Admission) -> None:
        if self.cache is None:
            return
        ctx.cache_key = cache_key(ctx)
        started, t0 = utcnow(), time.perf_counter()
        hit = self.cache.get(ctx.app.store, ctx.app.settings.collection, ctx.cache_key)
        if hit is None:
            return
        route, req = ctx.route, ctx.request
        saved = hit.saving(ctx.app.pricer, started)  # a live answer's price now, not the original's
        ctx.router.base.writer.put("queries", queries_row(route.query_id, "query", "ok", started, t0, **{
            "question": req.question, "mode": hit.payload["mode"], "variant": route.variant,
            "experiment": route.experiment, **route.extra,
            # origin `cache`: an experiment's comparison reads live runs of its arms, never hits
            "origin": "cache", "cache_hit": 1, "saved_cost_nano_usd": saved.nano,
            "cached_from": hit.payload["query_id"], "price_warning": saved.warning}))
        mine = req.principal.admin or hit.user == req.user_id
        ctx.result = QueryResult(hit_payload(hit, route.query_id, saved.nano, saved.warning, show_origin=mine),
                                 route, cache_hit=True, saving=saved)

    def undo(self, ctx: Admission) -> None:
        pass


def cache_key(ctx: Admission) -> str:
    """The question, its scope, and everything that decides its answer: the collection, the variant and
    what it runs with, the experiment and arm."""
    route, app_, req = ctx.route, ctx.app, ctx.request
    settings: dict[str, Any] = {"overrides": ctx.router.config.variants.get(route.app_variant, {}),
                                "prompt_version": app_.settings.prompt_version, "llm_model": app_.settings.llm_model}
    return AnswerCache.key(req.question, req.scope, collection=app_.settings.collection, variant=route.variant,
                           experiment=route.experiment, arm=route.assignment.arm if route.assignment else None,
                           settings=settings)
