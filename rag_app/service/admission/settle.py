"""Step `settle`: after the answer. The key's token reservation takes the LLM tokens the query really
used (0 on a cache hit: it called no model), and a complete live answer goes into the answer cache (a
reply cut short is asked again). Reads `ticket`, `answer`, `payload` and `cache_key`; never refuses."""
from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rag_app.access import RateLimiter
from rag_app.core import StageUsage, totals
from rag_app.query import REWRITE_STAGE
from rag_app.service.admission.context import Admission
from rag_app.spend import AnswerCache, Cached, live_usage

LLM_STAGES = ("generate", REWRITE_STAGE)


class Settle:
    name: ClassVar[str] = "settle"

    def __init__(self, limiter: RateLimiter | None, cache: AnswerCache | None):
        self.limiter, self.cache = limiter, cache

    def enter(self, ctx: Admission) -> None:
        answer = ctx.answer
        if self.limiter is not None:
            self.limiter.settle(ctx.ticket, llm_tokens(answer.usage) if answer is not None else 0)
        if self.cache is None or ctx.cache_key is None or answer is None or ctx.payload is None or answer.incomplete:
            return
        app_ = ctx.app
        self.cache.put(app_.store, app_.settings.collection, ctx.cache_key,
                       Cached(ctx.payload, totals(answer.usage).known_cost_nano, live_usage(answer.usage),
                              ctx.request.user_id))

    def undo(self, ctx: Admission) -> None:
        pass


def llm_tokens(usages: Sequence[StageUsage]) -> int:
    """What a query's LLM calls sent and received (the answer and the rewrite, every attempt made): what a
    key's tokens-per-minute limit counts."""
    return sum(u.input_tokens + u.output_tokens for u in usages
               if u.stage in LLM_STAGES and u.status != "skipped")
