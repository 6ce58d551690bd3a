"""Keys and rate windows on each ledger backend (a SQLite file, then a throwaway PostgreSQL database):
the secret is never stored, a revoked or rotated secret stops resolving, and a rate window shared by
many writers at once admits exactly its limit (the limit that every replica sharing the ledger enforces)."""
from __future__ import annotations

import json
import threading
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from rag_app.access import manage
from rag_app.access.keys import KeyRing, KeySpec, Unauthorized, secret_hash
from tracing.ledger import Ledger

NOW = datetime(2026, 12, 4, 7, 0, tzinfo=UTC)


def test_keys_are_kept_hashed_and_resolve_until_revoked(ledger_url):
    with Ledger.open(ledger_url) as L:
        secret = manage.create(L, KeySpec.parse({"name": "alice", "user": "a@x", "rpm": 3, "models": "m1,m2"}), "cli", NOW)
        ring = KeyRing(L.key_by_secret, L.any_keys, ttl_s=0)
        p = ring.resolve(secret)
        assert (p.name, p.user, p.role, p.rpm, p.models, p.issued) == ("alice", "a@x", "member", 3, ("m1", "m2"), True)
        with L.engine.connect() as db:  # the secret itself is nowhere in the database
            dumped = " ".join(str(v) for t in ("api_keys", "key_audit") for r in db.execute(sa.text(f"SELECT * FROM {t}"))
                              for v in r)
        assert secret not in dumped and secret_hash(secret) in dumped
        new = manage.rotate(L, "alice", "cli", NOW)
        with pytest.raises(Unauthorized, match="unknown"):
            ring.resolve(secret)
        assert ring.resolve(new).name == "alice"
        manage.revoke(L, "alice", "cli", NOW)
        with pytest.raises(Unauthorized, match="revoked"):
            ring.resolve(new)
        assert [e["action"] for e in L.key_audit()] == ["revoke", "rotate", "create"]
        assert [k["state"] for k in manage.listing(L)] == ["revoked"]


T0 = 1_796_367_600_000  # 2026-12-04T07:00:00Z in ms
WINDOW = 60_000


def replicas(ledger_url, n: int, each: int, step) -> list:
    """`n` threads, each a replica with its own connections, calling `step(ledger)` `each` times at once."""
    with Ledger.open(ledger_url) as setup:
        setup.any_keys()
    out: list = []
    lock, start = threading.Lock(), threading.Barrier(n)

    def replica():
        with Ledger.open(ledger_url) as L:
            start.wait()
            for _ in range(each):
                got = step(L)
                with lock:
                    out.append(got)

    threads = [threading.Thread(target=replica) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(out) == n * each
    return out


def test_a_shared_rate_window_admits_exactly_its_limit(ledger_url):
    steps = replicas(ledger_url, 4, 5, lambda L: L.rate_admit("k", T0 + 30_000, WINDOW, 7, None, 0))
    assert sum(s.taken for s in steps) == 7
    with Ledger.open(ledger_url) as L:
        # a sliding window: the next minute's first second is still within 60 s of all seven
        late = L.rate_admit("k", T0 + 61_000, WINDOW, 7, None, 0)
        assert not late.taken and late.requests == 7 and late.retry_after_ms == 29_000
        assert L.rate_admit("k", T0 + 90_001, WINDOW, 7, None, 0).taken  # 60 s after them: room again
        assert L.prune_rate_events(T0 + 90_000) == 0  # the window itself dropped the old seven


def test_a_token_burst_over_replicas_stays_within_the_limit_and_one_request(ledger_url):
    """tpm 1000, each request reserving 300 before any has ended: 4 of 20 taken (0, 300, 600 and 900
    are below 1000), so at most the limit plus one request's tokens are in flight."""
    steps = replicas(ledger_url, 4, 5, lambda L: L.rate_admit("t", T0, WINDOW, None, 1000, 300))
    taken = [s for s in steps if s.taken]
    assert len(taken) == 4 and max(s.tokens for s in steps) == 1200 <= 1000 + 300
    with Ledger.open(ledger_url) as L:
        refused = L.rate_admit("t", T0 + 1000, WINDOW, None, 1000, 300)
        assert not refused.taken and refused.tokens == 1200 and refused.retry_after_ms == 59_000
        for s in taken:  # each used 100 of its 300: settled, the window has room again
            L.rate_settle(s.event_id, 100)
        again = L.rate_admit("t", T0 + 2000, WINDOW, None, 1000, 300)
        assert again.taken and again.tokens == 700
        L.rate_release(again.event_id)  # refused by a budget afterwards: it leaves the window
        assert L.rate_admit("t", T0 + 3000, WINDOW, None, 1000, 0).tokens == 400


def test_a_key_creates_collections_up_to_its_cap_across_replicas(ledger_url):
    def claim(L, name):
        row = {"at": "2026-12-04T07:00:00+00:00", "actor": "mia", "action": "create_collection", "target": name,
               "detail": None}
        return L.claim_collection("mia", name, 2, row)

    names = iter(f"c{i}" for i in range(100))
    lock = threading.Lock()

    def step(L):
        with lock:
            name = next(names)
        return claim(L, name)

    assert sum(replicas(ledger_url, 4, 3, step)) == 2
    with Ledger.open(ledger_url) as L:
        made = L.collections_created("mia")
        assert len(made) == 2 and claim(L, made[0])  # one it made before: not counted again
        assert not claim(L, "another")


def test_uploads_are_audit_rows_with_their_hash(ledger_url):
    rows = [{"at": "2026-12-04T07:00:00+00:00", "actor": "mia", "action": action, "target": "劳动法.md",
             "detail": json.dumps({"user": "mia@firm", "collection": "legal", "sha256": "ab" * 32,
                                   "replaced_doc_id": doc}, ensure_ascii=False)}
            for action, doc in (("upload", None), ("replace", "d1"))]
    with Ledger.open(ledger_url) as L:
        L.add_audits(rows)
        got = L.key_audit()
    assert [(e["action"], e["actor"], e["target"]) for e in got] == [("replace", "mia", "劳动法.md"),
                                                                      ("upload", "mia", "劳动法.md")]
    assert json.loads(got[0]["detail"])["replaced_doc_id"] == "d1"


def test_a_changed_budgets_file_is_an_audit_row(ledger_url, tmp_path):
    path = tmp_path / "budgets.json"
    with Ledger.open(ledger_url) as L:
        assert manage.audit_budgets(L, path, '{"budgets": []}', "file:ops@host", NOW)
        assert not manage.audit_budgets(L, path, '{"budgets": []}', "file:ops@host", NOW)  # unchanged: no row
        assert manage.audit_budgets(L, path, '{"budgets": [{"user": "*"}]}', "file:ops@host", NOW)
        rows = [e for e in L.key_audit() if e["action"] == "budgets"]
        assert len(rows) == 2 and rows[0]["actor"] == "file:ops@host" and '"user": "*"' in rows[0]["detail"]
