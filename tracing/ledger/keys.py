"""What keys and teams read and write in the ledger: issued keys (a hash of the secret, never the
secret), their audit trail (key changes, uploads, collections created), and the sliding rate window that
every replica sharing the ledger counts in.

A key's window is the requests it was admitted in the last 60 s, one `rate_events` row each with its
tokens. Admission reads the window and adds the request in one transaction under the key's lock
(PostgreSQL advisory lock; SQLite's one write lock), so two replicas can never both take the last
request or the last tokens. A taken request reserves its token estimate at once; the query's real count
replaces it when the query ends (`settle`), so a burst of concurrent requests sees each other's tokens
before any of them has finished."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from tracing.ledger.rollups import _insert
from tracing.ledger.schema import api_keys, key_audit, rate_events

RATE_LOCK = 0x7261746B  # pg_advisory_xact_lock(RATE_LOCK, hashtext(key)): "admitting a key's request" ("ratk")


def create(db: Connection, row: dict[str, Any]) -> bool:
    """False when a key of that name exists (revoked ones too: a name is never reused)."""
    res = db.execute(_insert(db, api_keys).values(**row).on_conflict_do_nothing(index_elements=["name"]))
    return bool(res.rowcount)


def all_keys(db: Connection) -> list[dict]:
    cols = [c for c in api_keys.c if c.name != "secret_sha256"]
    return [dict(r) for r in db.execute(select(*cols).order_by(api_keys.c.name)).mappings()]


def by_secret(db: Connection, secret_sha256: str) -> dict | None:
    row = db.execute(select(api_keys).where(api_keys.c.secret_sha256 == secret_sha256)).mappings().first()
    return dict(row) if row else None


def change(db: Connection, name: str, values: dict[str, Any]) -> bool:
    return bool(db.execute(update(api_keys).where(api_keys.c.name == name).values(**values)).rowcount)


def any_keys(db: Connection) -> bool:
    return db.execute(select(api_keys.c.name).limit(1)).first() is not None


def audit(db: Connection, row: dict[str, Any]) -> None:
    db.execute(key_audit.insert().values(**row))


def last_audit(db: Connection, action: str, target: str) -> dict | None:
    k = key_audit
    row = db.execute(select(k).where(k.c.action == action, k.c.target == target)
                     .order_by(k.c.at.desc(), k.c.id.desc()).limit(1)).mappings().first()
    return dict(row) if row else None


def audit_rows(db: Connection, limit: int) -> list[dict]:
    sel = select(key_audit).order_by(key_audit.c.at.desc(), key_audit.c.id.desc()).limit(limit)
    return [{k: v for k, v in dict(r).items() if k != "id"} for r in db.execute(sel).mappings()]


def audits_of(db: Connection, actor: str, action: str) -> list[str]:
    """The targets `actor` has audit rows of `action` for (the collections a key created)."""
    k = key_audit
    return [r[0] for r in db.execute(select(k.c.target).where(k.c.actor == actor, k.c.action == action)
                                     .distinct().order_by(k.c.target))]


def claim_collection(db: Connection, actor: str, collection: str, cap: int, row: dict[str, Any]) -> bool:
    """Record that key `actor` creates `collection` (its audit row), unless it has created `cap` others
    already; a collection it created before is not counted twice. Under the key's lock, so two replicas
    cannot both create its last allowed collection."""
    _rate_lock(db, f"collections:{actor}")
    made = audits_of(db, actor, "create_collection")
    if collection in made:
        return True
    if len(made) >= cap:
        return False
    audit(db, row)
    return True


@dataclass(frozen=True)
class RateStep:
    """One admission against a key's sliding window: whether it was taken, what the window then holds
    (this request included when taken), the event to settle, and when a refused one may come back."""

    taken: bool
    requests: int
    tokens: int
    event_id: int | None = None
    retry_after_ms: int = 0


def _rate_lock(db: Connection, key: str) -> None:
    """Admissions of one key run one at a time on every replica: a PostgreSQL transaction-scoped advisory
    lock on (RATE_LOCK, hash of the key) (the two-integer key space never meets the budget lock's); on
    SQLite the engine's BEGIN IMMEDIATE has taken the one write lock already."""
    if db.dialect.name == "postgresql":
        db.execute(select(func.pg_advisory_xact_lock(RATE_LOCK, func.hashtext(key))))


def admit(db: Connection, key: str, now_ms: int, window_ms: int, rpm: int | None, tpm: int | None,
          estimate: int) -> RateStep:
    """Take a request into `key`'s window (now - window_ms, now] unless it holds `rpm` requests or its
    tokens (reserved or used) reached `tpm`; a taken request reserves `estimate` tokens. Under the key's
    lock, so requests of every replica are counted one after another: the window never holds more than
    `rpm` requests, and its tokens pass `tpm` by at most the last admitted request's."""
    e = rate_events
    _rate_lock(db, key)
    since = now_ms - window_ms
    db.execute(e.delete().where(e.c.key_name == key, e.c.at_ms <= since))
    n, used = db.execute(select(func.count(), func.coalesce(func.sum(e.c.tokens), 0))
                         .where(e.c.key_name == key, e.c.at_ms > since)).one()
    n, used = int(n), int(used)
    if (rpm is None or n < rpm) and (tpm is None or used < tpm):
        event = db.execute(insert(e).values(key_name=key, at_ms=now_ms, tokens=max(0, estimate))
                           .returning(e.c.id)).scalar_one()
        return RateStep(True, n + 1, used + max(0, estimate), int(event))
    held = db.execute(select(e.c.at_ms, e.c.tokens).where(e.c.key_name == key, e.c.at_ms > since)
                      .order_by(e.c.at_ms, e.c.id)).all()
    return RateStep(False, n, used, None, _free_at(held, n, used, rpm, tpm) + window_ms - now_ms)


def _free_at(held: Sequence[Any], n: int, used: int, rpm: int | None, tpm: int | None) -> int:
    """When the oldest requests that must leave the window for one more to fit were admitted."""
    at = held[0][0] if held else 0
    for at_ms, tokens in held:
        if (rpm is None or n < rpm) and (tpm is None or used < tpm):
            break
        at, n, used = at_ms, n - 1, used - int(tokens)
    return int(at)


def settle(db: Connection, event_id: int, tokens: int) -> None:
    """The request's real token count in place of its reservation (nothing once it left the window)."""
    db.execute(update(rate_events).where(rate_events.c.id == event_id).values(tokens=max(0, tokens)))


def release(db: Connection, event_id: int) -> None:
    """A request refused after admission (over a budget) never began: it leaves the window."""
    db.execute(rate_events.delete().where(rate_events.c.id == event_id))


def prune_events(db: Connection, before_ms: int) -> int:
    return int(db.execute(rate_events.delete().where(rate_events.c.at_ms <= before_ms)).rowcount or 0)
