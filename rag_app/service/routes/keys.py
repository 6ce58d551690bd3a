"""/v1/keys: issue (the secret is in this response only), list (never a secret), rotate and revoke
API keys, and read the audit trail (key changes, uploads and replacements, collections created). Admins
only; each change is an audit row naming the admin key."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, ConfigDict, Field

from rag_app.access import manage
from rag_app.access import KeySpec
from rag_app.access import check_admin
from rag_app.core import ConfigError
from rag_app.service.deps import Authed, Caller, Svc

router = APIRouter(dependencies=Authed)


class KeyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=64)
    user: str | None = Field(None, max_length=200)
    role: str = "member"
    budget_usd: float | str | None = None
    period: str = "month"
    rpm: int | None = None
    tpm: int | None = None
    models: list[str] | None = Field(None, max_length=100)
    collections: list[str] | None = Field(None, max_length=100)
    documents: list[str] | None = Field(None, max_length=500)
    can_ingest: bool = False
    expires: str | None = Field(None, max_length=40)
    can_replace: bool = False
    can_create_collections: bool = False
    max_collections: int | None = None


def actor(who) -> str:
    return who.name or "open"


@router.post("/v1/keys", status_code=201)
def create_key(req: KeyRequest, svc: Svc, who: Caller) -> dict[str, Any]:
    check_admin(who, "creating keys")
    try:
        spec = KeySpec.parse(req.model_dump())
        secret = svc.read(lambda L: manage.create(L, spec, actor(who)), flush=False)
    except ConfigError as e:
        raise HTTPException(422 if "exists" not in str(e) else 409, str(e)) from None
    return {"name": spec.name, "key": secret}


@router.get("/v1/keys")
def list_keys(svc: Svc, who: Caller) -> dict[str, Any]:
    check_admin(who, "listing keys")
    return {"keys": svc.read(lambda L: manage.listing(L), flush=False)}


@router.post("/v1/keys/{name}/rotate")
def rotate_key(name: str, svc: Svc, who: Caller) -> dict[str, Any]:
    check_admin(who, "rotating keys")
    try:
        secret = svc.read(lambda L: manage.rotate(L, name, actor(who)), flush=False)
    except ConfigError as e:
        raise HTTPException(404 if "no key" in str(e) else 409, str(e)) from None
    svc.keys.forget()  # the old secret stops here at once
    return {"name": name, "key": secret}


@router.delete("/v1/keys/{name}")
def revoke_key(name: str, svc: Svc, who: Caller) -> dict[str, Any]:
    check_admin(who, "revoking keys")
    try:
        svc.read(lambda L: manage.revoke(L, name, actor(who)), flush=False)
    except ConfigError as e:
        raise HTTPException(404, str(e)) from None
    svc.keys.forget()  # refused at once on this replica, not after the 2 s every replica may cache a key
    return {"name": name, "revoked": True}


@router.get("/v1/keys/audit")
def key_audit(svc: Svc, who: Caller, limit: int = Query(100, ge=1, le=1000)) -> dict[str, Any]:
    check_admin(who, "the key audit")
    return {"events": svc.read(lambda L: L.key_audit(limit), flush=False)}
