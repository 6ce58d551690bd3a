"""The `cache` step alone, on a real AnswerCache kept beside the app's collection and its real ledger
writer: a miss adds the key, a hit answers (its query row written, the saving priced now) and shows the
original query only to its user or an admin."""
from __future__ import annotations

import uuid

from rag_app.access.keys import Principal
from rag_app.core.usage import StageUsage
from rag_app.service.admission import QueryRequest, ServeFromCache
from rag_app.spend.answer_cache import AnswerCache, Cached
from tests.unit.service.admission.conftest import rows

PAYLOAD = {"query_id": "q-original", "question": "q", "answer": "a", "mode": "llm", "stages": [{"stage": "generate"}],
           "total_cost_usd": 0.0001}
USAGE = (StageUsage("generate", model="gpt-4o-mini", input_tokens=1000, output_tokens=100, billing="billed",
                    price_basis="llm", status="ok"),)


def kept(app, cache, c, user="u1"):
    """What a live answer for `c` leaves in the cache (the settle step's put)."""
    cache.put(app.store, app.settings.collection, c.cache_key, Cached(PAYLOAD, 210_000, USAGE, user))


def test_a_miss_adds_the_key_and_answers_nothing(app, ctx):
    question = f"miss {uuid.uuid4()}"
    c = ctx(QueryRequest(question, user_id="u1"))
    step = ServeFromCache(AnswerCache(10))
    step.enter(c)
    assert c.cache_key and c.result is None
    assert ctx(QueryRequest(question + "  ", user_id="u2")).route.variant == c.route.variant
    other = ctx(QueryRequest(question, user_id="u1", variant="cheaper"))
    step.enter(other)
    assert other.cache_key != c.cache_key  # another variant answers differently: never its entry


def test_a_hit_answers_for_nothing_and_writes_its_row(app, ctx):
    cache, question = AnswerCache(10), f"hit {uuid.uuid4()}"
    step = ServeFromCache(cache)
    first = ctx(QueryRequest(question, user_id="u1"))
    step.enter(first)
    kept(app, cache, first)
    c = ctx(QueryRequest(question, user_id="u1", key_id="cli", principal=Principal("cli", "u1", "member")))
    step.enter(c)
    r = c.result
    assert r is not None and r.cache_hit and r.route is c.route
    assert r.answer["query_id"] == c.route.query_id and r.answer["cached_from"] == "q-original"
    assert r.answer["total_cost_usd"] == 0.0 and r.answer["stages"] == []
    assert r.saving is not None and r.saving.nano == 1000 * 150 + 100 * 600  # gpt-4o-mini now
    [(origin, hit, saved, cached_from, user, key)] = rows(
        app, "SELECT origin, cache_hit, saved_cost_nano_usd, cached_from, user_id, api_key_id FROM queries "
             "WHERE query_id = :q", q=c.route.query_id)
    assert (origin, hit, saved, cached_from, user, key) == ("cache", 1, 210_000, "q-original", "u1", "cli")


def test_another_members_hit_does_not_name_the_original(app, ctx):
    cache, question = AnswerCache(10), f"theirs {uuid.uuid4()}"
    step = ServeFromCache(cache)
    first = ctx(QueryRequest(question, user_id="u1"))
    step.enter(first)
    kept(app, cache, first, user="u1")
    c = ctx(QueryRequest(question, user_id="u2", principal=Principal("k2", "u2", "member")))
    step.enter(c)
    assert c.result is not None and c.result.answer["cached_from"] is None


def test_no_cache_no_key(ctx):
    c = ctx()
    ServeFromCache(None).enter(c)
    assert c.cache_key is None and c.result is None
