"""The `rate` step alone, on a real RateLimiter over the app's SQLite ledger: a place in the key's window
taken, the question's tokens reserved for a `tpm` key, and given back by `undo`."""
from __future__ import annotations

import pytest

from rag_app.access.keys import Principal
from rag_app.access.rate import RateLimited, RateLimiter
from rag_app.service.admission import QueryRequest, TakeRateSlot
from tests.unit.service.admission.conftest import rows


def window(app, key):
    return rows(app, "SELECT COUNT(*), COALESCE(SUM(tokens), 0) FROM rate_events WHERE key_name = :k", k=key)[0]


@pytest.fixture
def step(ledger):
    return TakeRateSlot(RateLimiter(lambda fn: fn(ledger)))


def test_a_tpm_key_takes_a_place_and_reserves_the_questions_ceiling(app, ctx, step):
    c = ctx(QueryRequest("q", key_id="t1", principal=Principal("t1", "t1", "member", tpm=100_000)))
    step.enter(c)
    assert c.ticket is not None and c.ticket.reserved == c.estimate.tokens > 0
    assert window(app, "t1") == (1, c.estimate.tokens)


def test_an_rpm_only_key_reserves_no_tokens_and_a_full_window_is_a_429(app, ctx, step):
    key = Principal("r1", "r1", "member", rpm=1)
    step.enter(ctx(QueryRequest("q", key_id="r1", principal=key)))
    with pytest.raises(RateLimited) as e:
        step.enter(ctx(QueryRequest("q", key_id="r1", principal=key)))
    assert e.value.body["limit"] == "rpm" and window(app, "r1") == (1, 0)


def test_undo_gives_the_place_back(app, ctx, step):
    key = Principal("u1", "u1", "member", rpm=1, tpm=100_000)
    c = ctx(QueryRequest("q", key_id="u1", principal=key))
    step.enter(c)
    step.undo(c)  # a later step refused: the request never began
    assert window(app, "u1") == (0, 0) and c.ticket is None
    step.enter(ctx(QueryRequest("q", key_id="u1", principal=key)))  # its one place is free again
    assert window(app, "u1")[0] == 1


def test_without_a_limiter_or_limits_nothing_is_taken(app, ctx, step):
    c = ctx(QueryRequest("q", key_id="free", principal=Principal("free", "free", "member")))
    step.enter(c)
    TakeRateSlot(None).enter(c)
    assert c.ticket is None and window(app, "free") == (0, 0)
