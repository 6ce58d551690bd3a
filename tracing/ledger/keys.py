"""What keys and teams read and write in the ledger: issued keys (a hash of the secret, never the
secret), their audit trail, and per-minute rate windows that every replica sharing the ledger counts in.

A rate window is taken in one statement per step: a conditional UPDATE (`requests < rpm`) either counts
the request or changes nothing, so two replicas can never both take the last request of a minute
(PostgreSQL row lock; SQLite's one write lock). Tokens are added once the query's usage is known; a
minute whose tokens reached `tpm` refuses the next request until the minute turns."""
from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select, update

from tracing.ledger.rollups import _insert
from tracing.ledger.schema import api_keys, key_audit, rate_windows


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


def take(db: Connection, key: str, window: str, rpm: int | None, tpm: int | None) -> tuple[bool, int, int]:
    """Count one request in `key`'s minute unless it is full: (taken, requests, tokens) after the step."""
    w = rate_windows
    db.execute(_insert(db, w).values(key_name=key, window_start=window, requests=0, tokens=0)
               .on_conflict_do_nothing(index_elements=["key_name", "window_start"]))
    cond = [w.c.key_name == key, w.c.window_start == window]
    if rpm is not None:
        cond.append(w.c.requests < rpm)
    if tpm is not None:
        cond.append(w.c.tokens < tpm)
    taken = bool(db.execute(update(w).where(*cond).values(requests=w.c.requests + 1)).rowcount)
    requests, tokens = db.execute(select(w.c.requests, w.c.tokens).where(*cond[:2])).one()
    return taken, int(requests), int(tokens)


def add_tokens(db: Connection, key: str, window: str, tokens: int) -> None:
    w = rate_windows
    db.execute(update(w).where(w.c.key_name == key, w.c.window_start == window).values(tokens=w.c.tokens + tokens))


def prune_windows(db: Connection, before: str) -> int:
    return int(db.execute(rate_windows.delete().where(rate_windows.c.window_start < before)).rowcount or 0)
