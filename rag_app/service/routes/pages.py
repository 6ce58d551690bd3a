"""What needs no JSON client: the cost dashboard (one static page that reads the API) and /healthz."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException
from fastapi.responses import HTMLResponse, Response

from rag_app.access import Unauthorized
from rag_app.service.deps import Bearer, Svc, admin_ok, principal_of
from rag_app.service.inputs import dashboard_headers

router = APIRouter()
STATIC = Path(__file__).parent.parent / "static"
DASHBOARD = STATIC / "dashboard.html"
# the page's scripts beside its own inline one: code only, no data, so no key is asked for them
SCRIPTS = {"experiment.js": STATIC / "dashboard-experiment.js"}


@router.get("/dashboard", response_class=HTMLResponse)
def dashboard(svc: Svc, creds: Bearer, token: str | None = None):
    """The cost dashboard: one static page, no build step, no CDN; it reads the JSON API."""
    try:  # the page's own requests carry the same key: a member's page shows its own queries
        principal_of(svc, token or (creds.credentials if creds else None))
    except Unauthorized:
        raise HTTPException(401, "open /dashboard?token=<your API key or RAG_API_TOKEN>") from None
    page = DASHBOARD.read_text(encoding="utf-8")
    return HTMLResponse(page, media_type="text/html; charset=utf-8", headers=dashboard_headers(page))


@router.get("/dashboard/{name}")
def dashboard_script(name: str):
    """A script of the dashboard (plain JavaScript, served as it is in the repository: no build step)."""
    path = SCRIPTS.get(name)
    if path is None:
        raise HTTPException(404, f"no dashboard file {name[:80]!r}")
    return Response(path.read_text(encoding="utf-8"), media_type="text/javascript; charset=utf-8",
                    headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"})


@router.get("/healthz")
def healthz(svc: Svc, creds: Bearer):
    """`up` or `degraded` (rows waiting in memory, a spill file being replayed, rows spilled or lost).
    The details (ledger counters, its last error, spill files, the OTel exporter's drops) need an admin
    key when keys or a token are in use: paths, hosts and endpoints are no member's business."""
    base = svc.pool.base
    ledger_health = base.writer.health()
    body: dict[str, Any] = {"status": "degraded" if ledger_health["status"] == "degraded" else "up"}
    if not admin_ok(svc, creds):
        return body
    body["ledger"] = ledger_health
    body["shadow_skipped"] = svc.pool.shadow_skipped
    body["collections"] = {"open": len(svc.pool.open_collections()), "evicted": svc.pool.evicted}
    if base.judge is not None:  # gradings offered, judged, failed, dropped (a full queue), waiting
        body["judge"] = base.judge.stats()
    if base.otel is not None:  # export is best effort: its drops show here, status stays the ledger's
        body["otel"] = base.otel.health()
    return body
