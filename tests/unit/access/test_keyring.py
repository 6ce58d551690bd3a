"""The key ring while the ledger is unreachable: a key read before is judged by what was last read (a
question still gets its answer), a key never read is the ledger's error (503), not a 401; whether keys
were issued keeps its last answer; and a rate limit follows RAG_BUDGET_LEDGER_DOWN."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rag_app.access.keys import KeyRing, KeySpec, Principal, Unauthorized, secret_hash
from rag_app.access.rate import RateLimited, RateLimiter

NOW = datetime(2026, 12, 4, 7, 0, 30, tzinfo=UTC)


class Down(Exception):
    pass


def ring_over(rows: dict, state: dict) -> KeyRing:
    def lookup(h):
        if state["down"]:
            raise Down("ledger unreachable")
        return rows.get(h)

    def any_issued():
        if state["down"]:
            raise Down("ledger unreachable")
        return bool(rows)

    return KeyRing(lookup, any_issued, ttl_s=0, clock=lambda: NOW)


def test_a_key_read_before_outlives_an_outage_and_a_new_one_is_the_ledgers_error():
    secret = "rag_" + "x" * 43
    row = {**KeySpec.parse({"name": "alice"}).row(secret, NOW), "revoked_at": None, "rotated_at": None}
    rows, state = {secret_hash(secret): row}, {"down": False}
    ring = ring_over(rows, state)
    assert ring.issued() and ring.resolve(secret).name == "alice"
    state["down"] = True
    assert ring.issued()  # the last answer stands
    assert ring.resolve(secret).name == "alice"  # judged by what was last read
    with pytest.raises(Down):
        ring.resolve("rag_" + "y" * 43)  # never read: not a 401 (it may be a good key)
    state["down"] = False
    with pytest.raises(Unauthorized, match="unknown"):
        ring.resolve("rag_" + "y" * 43)


def test_never_read_assumes_no_key_issued():
    ring = ring_over({}, {"down": True})
    assert ring.issued() is False


def test_a_rate_limit_with_the_ledger_down_follows_the_budget_policy():
    def down(fn):
        raise Down("ledger unreachable")

    limited = Principal("k", "k", "member", rpm=1)
    with pytest.raises(Down):
        RateLimiter(down, clock=lambda: NOW).admit(limited)
    open_ = RateLimiter(down, clock=lambda: NOW, fail_open=True)
    assert open_.admit(limited) is None and open_.admitted_uncounted == 1


def test_a_full_window_names_its_limit_and_when_room_comes_back():
    from tracing.ledger.keys import RateStep

    class Ledger:
        def rate_admit(self, key, now_ms, window_ms, rpm, tpm, estimate):
            return RateStep(False, 1, 0, None, retry_after_ms=29_400)

        def prune_rate_events(self, before_ms):
            return 0

    with pytest.raises(RateLimited) as e:
        RateLimiter(lambda fn: fn(Ledger()), clock=lambda: NOW).admit(Principal("k", "k", "member", rpm=1))
    assert e.value.retry_after_s == 30 and e.value.body["limit"] == "rpm" and e.value.body["window_s"] == 60


def test_a_revoke_is_refused_at_once_by_the_ring_that_made_it():
    """A replica caches a resolved key for ttl_s; the revoke it made itself must not wait for that."""
    secret = "rag_" + "r" * 43
    row = {**KeySpec.parse({"name": "rex"}).row(secret, NOW), "revoked_at": None, "rotated_at": None}
    rows = {secret_hash(secret): row}
    ring = KeyRing(lambda h: rows.get(h), lambda: True, ttl_s=3600, clock=lambda: NOW)
    assert ring.resolve(secret).name == "rex"
    rows[secret_hash(secret)] = {**row, "revoked_at": "2026-12-04T07:00:00+00:00"}
    assert ring.resolve(secret).name == "rex"  # cached: what another replica's revoke waits out
    ring.forget()
    with pytest.raises(Unauthorized, match="revoked"):
        ring.resolve(secret)


def test_a_past_expiry_is_refused_in_one_line():
    from rag_app.core.errors import ConfigError

    with pytest.raises(ConfigError, match="past") as e:
        KeySpec.parse({"name": "old", "expires": "2020-01-01"}, now=NOW)
    assert "\n" not in str(e.value)
    assert KeySpec.parse({"name": "new", "expires": "2027-01-01"}, now=NOW).expires == "2027-01-01T00:00:00+00:00"


@pytest.mark.parametrize("user", ["evil\u202eman", "a\u2066b", "x\u200f"])
def test_a_user_with_bidirectional_controls_is_refused(user):
    from rag_app.core.errors import ConfigError

    with pytest.raises(ConfigError, match="user"):
        KeySpec.parse({"name": "bidi", "user": user})
