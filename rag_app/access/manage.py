"""Issuing, rotating and revoking keys: what `rag keys` and /v1/keys both do, each change with its
audit row (who, what, when) written in the same transaction."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from rag_app.access.keys import KeySpec, new_secret, refusal, secret_hash, stamp
from rag_app.core import ConfigError
from rag_app.core import usd_json


def _audit(actor: str, action: str, target: str, now: datetime, detail: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"at": stamp(now), "actor": actor, "action": action, "target": target,
            "detail": json.dumps(detail, ensure_ascii=False, default=str) if detail else None}


def create(ledger: Any, spec: KeySpec, actor: str, now: datetime | None = None) -> str:
    """The new key's secret (shown once, never stored); a taken name is a ConfigError."""
    now = now or datetime.now(UTC)
    secret = new_secret()
    if not ledger.create_key(spec.row(secret, now), _audit(actor, "create", spec.name, now, spec.shown())):
        raise ConfigError(f"a key named {spec.name!r} exists (names are never reused); choose another name")
    return secret


def revoke(ledger: Any, name: str, actor: str, now: datetime | None = None) -> None:
    now = now or datetime.now(UTC)
    if not ledger.change_key(name, {"revoked_at": stamp(now)}, _audit(actor, "revoke", name, now)):
        raise ConfigError(f"no key named {name!r}; `rag keys list` shows them")


def rotate(ledger: Any, name: str, actor: str, now: datetime | None = None) -> str:
    """A new secret for the key (the old one stops working); name, user, limits and history stay."""
    now = now or datetime.now(UTC)
    row = next((r for r in ledger.list_keys() if r["name"] == name), None)
    if row is None:
        raise ConfigError(f"no key named {name!r}; `rag keys list` shows them")
    if row["revoked_at"]:
        raise ConfigError(f"key {name!r} is revoked; create a new one")
    secret = new_secret()
    ledger.change_key(name, {"secret_sha256": secret_hash(secret), "prefix": secret[:8], "rotated_at": stamp(now)},
                      _audit(actor, "rotate", name, now))
    return secret


def listing(ledger: Any, now: datetime | None = None) -> list[dict[str, Any]]:
    """Every key as people read it (never the secret, never its hash), with its state now."""
    now = now or datetime.now(UTC)
    out = []
    for r in ledger.list_keys():
        why = refusal({**r}, now)
        state = "active" if why is None else "revoked" if r["revoked_at"] else "expired"
        out.append({"name": r["name"], "prefix": r["prefix"], "user": r["user_id"], "role": r["role"], "state": state,
                    "budget_usd": usd_json(r["budget_nano_usd"]), "period": r["budget_period"], "rpm": r["rpm"],
                    "tpm": r["tpm"], "models": _list(r["models"]), "collections": _list(r["collections"]),
                    "documents": _list(r["documents"]), "can_ingest": bool(r["can_ingest"]),
                    "can_replace": bool(r["can_replace"]), "can_create_collections": bool(r["can_create_collections"]),
                    "max_collections": r["max_collections"],
                    "created_at": r["created_at"], "expires_at": r["expires_at"], "revoked_at": r["revoked_at"],
                    "rotated_at": r["rotated_at"]})
    return out


def _list(v: str | None) -> list[str] | None:
    return json.loads(v) if v else None


def audit_budgets(ledger: Any, path: Any, text: str, actor: str, now: datetime | None = None) -> bool:
    """A budgets file (RAG_BUDGETS_FILE) is changed by editing it: each start that finds it changed
    since the last one writes an audit row with its content and hash (True when it wrote one)."""
    import hashlib

    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    last = ledger.last_audit("budgets", str(path))
    if last is not None and json.loads(last["detail"] or "{}").get("sha256") == digest:
        return False
    try:
        content: Any = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to read: kept as text
        content = text[:2000]
    ledger.add_audit(_audit(actor, "budgets", str(path), now or datetime.now(UTC), {"sha256": digest, "file": content}))
    return True
