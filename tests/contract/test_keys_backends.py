"""Keys and rate windows on each ledger backend (a SQLite file, then a throwaway PostgreSQL database):
the secret is never stored, a revoked or rotated secret stops resolving, and a rate window shared by
many writers at once admits exactly its limit (the limit that every replica sharing the ledger enforces)."""
from __future__ import annotations

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


def test_a_shared_rate_window_admits_exactly_its_limit(ledger_url):
    with Ledger.open(ledger_url) as setup:
        setup.any_keys()
    taken: list[bool] = []
    lock = threading.Lock()

    def replica():
        with Ledger.open(ledger_url) as L:  # each thread is a replica with its own connections
            for _ in range(5):
                ok, _, _ = L.rate_take("k", "2026-12-04T07:00", 7, None)
                with lock:
                    taken.append(ok)

    threads = [threading.Thread(target=replica) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(taken) == 20 and sum(taken) == 7
    with Ledger.open(ledger_url) as L:
        assert L.rate_take("k", "2026-12-04T07:01", 7, None)[0]  # the next minute starts afresh
        L.rate_add_tokens("k", "2026-12-04T07:01", 500)
        assert L.rate_take("k", "2026-12-04T07:01", None, 500) == (False, 1, 500)
        assert L.prune_rate_windows("2026-12-04T07:01") == 1


def test_a_changed_budgets_file_is_an_audit_row(ledger_url, tmp_path):
    path = tmp_path / "budgets.json"
    with Ledger.open(ledger_url) as L:
        assert manage.audit_budgets(L, path, '{"budgets": []}', "file:ops@host", NOW)
        assert not manage.audit_budgets(L, path, '{"budgets": []}', "file:ops@host", NOW)  # unchanged: no row
        assert manage.audit_budgets(L, path, '{"budgets": [{"user": "*"}]}', "file:ops@host", NOW)
        rows = [e for e in L.key_audit() if e["action"] == "budgets"]
        assert len(rows) == 2 and rows[0]["actor"] == "file:ops@host" and '"user": "*"' in rows[0]["detail"]
