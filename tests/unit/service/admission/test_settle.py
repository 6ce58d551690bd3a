"""The `settle` step alone: the key's reservation takes the LLM tokens really used (0 after a cache hit),
and a complete live answer is kept in the answer cache (a cut reply is not)."""
from __future__ import annotations

import uuid

from rag_app.access.keys import Principal
from rag_app.access.rate import RateLimiter
from rag_app.core.types import Answer
from rag_app.core.usage import StageUsage
from rag_app.service.admission import QueryRequest, ServeFromCache, Settle, TakeRateSlot, llm_tokens
from rag_app.spend.answer_cache import AnswerCache
from tests.unit.service.admission.conftest import rows

USAGE = (StageUsage("rewrite", model="gpt-4o-mini", input_tokens=200, output_tokens=20, billing="billed"),
         StageUsage("generate", model="gpt-4o-mini", status="retry", input_tokens=900, output_tokens=0, billing="billed"),
         StageUsage("generate", model="gpt-4o-mini", input_tokens=900, output_tokens=40, billing="billed"),
         StageUsage("embed_query", model="e5", input_tokens=30, billing="none"))


def answered(c, status="ok"):
    """What the run step leaves: the answer and the presenter's payload."""
    usage = USAGE[:-2] + (StageUsage("generate", model="gpt-4o-mini", status=status, input_tokens=900,
                                     output_tokens=40, billing="billed"), USAGE[-1])
    c.answer = Answer(c.route.query_id, c.request.question, "答", (), "llm", usage=usage)
    c.payload = {"query_id": c.route.query_id, "answer": "答", "mode": "llm"}


def tokens_of(app, key):
    return rows(app, "SELECT COALESCE(SUM(tokens), 0) FROM rate_events WHERE key_name = :k", k=key)[0][0]


def test_llm_tokens_count_every_llm_attempt_and_nothing_else():
    assert llm_tokens(USAGE) == 220 + 900 + 940


def test_the_reservation_takes_the_tokens_used(app, ledger, ctx):
    limiter = RateLimiter(lambda fn: fn(ledger))
    c = ctx(QueryRequest("q", key_id="s1", principal=Principal("s1", "s1", "member", tpm=100_000)))
    TakeRateSlot(limiter).enter(c)
    assert tokens_of(app, "s1") == c.estimate.tokens
    answered(c)
    Settle(limiter, None).enter(c)
    assert tokens_of(app, "s1") == llm_tokens(c.answer.usage)


def test_after_a_cache_hit_the_reservation_takes_nothing(app, ledger, ctx):
    limiter = RateLimiter(lambda fn: fn(ledger))
    c = ctx(QueryRequest("q", key_id="s2", principal=Principal("s2", "s2", "member", tpm=100_000)))
    TakeRateSlot(limiter).enter(c)
    Settle(limiter, None).enter(c)  # no answer: the cache answered
    assert tokens_of(app, "s2") == 0


def test_a_complete_answer_is_kept_and_a_cut_one_is_not(app, ctx):
    cache = AnswerCache(10)
    for status, kept in (("ok", True), ("incomplete", False)):
        question = f"{status} {uuid.uuid4()}"
        c = ctx(QueryRequest(question, user_id="u1"))
        ServeFromCache(cache).enter(c)
        answered(c, status)
        Settle(None, cache).enter(c)
        again = ctx(QueryRequest(question, user_id="u1"))
        ServeFromCache(cache).enter(again)
        assert (again.result is not None) is kept, status
        if kept:
            assert again.result.answer["cached_from"] == c.route.query_id
