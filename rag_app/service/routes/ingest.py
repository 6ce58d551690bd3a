"""/v1/ingest: uploaded files saved under the data dir and indexed, each known by its name; every upload
is within the key's rights and on the record.

Before a byte is written: the key may upload into the collection (admin, or --ingest and a collection it
may read), only its own document names when it has a list (--documents), may replace a document already
there only with --replace (or as admin), and may create the collection only as admin or with
--create-collections, within its cap. A refusal is a 403 naming the document or collection (never a
doc_id) and writes nothing. Each file stored is then a `key_audit` row: the key, its user, the collection,
the file name, its SHA-256 and the document it replaced (`rag keys audit`, GET /v1/keys/audit)."""
from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path

from fastapi import APIRouter, File, Form, HTTPException, UploadFile

from rag_app.access import Principal, stamp
from rag_app.access import Forbidden, check_create, check_ingest, check_replace, check_writes
from rag_app.core import StoreError
from rag_app.store import check_name
from rag_app.service.deps import Authed, Caller, ServiceState, Svc
from rag_app.service.inputs import save_uploads, stored_name, upload_dir, upload_name

router = APIRouter(dependencies=Authed)
log = logging.getLogger(__name__)


@router.post("/v1/ingest")
def ingest(svc: Svc, who: Caller, files: list[UploadFile] = File(...), collection: str | None = Form(None)):
    """Each file is known by its name: uploading `劳动法.md` again replaces its old chunks. `collection`
    (a form field; default RAG_COLLECTION) is where they go."""
    target = svc.settings.collection if collection is None else collection
    try:
        check_name(target)
    except StoreError as e:
        raise HTTPException(422, f"collection: {e}") from None
    check_ingest(who, target)
    names = [upload_name(f) for f in files]
    check_writes(who, names)
    creating = target != svc.settings.collection and not svc.pool.has_collection(target)
    cap = check_create(who, target) if creating else None
    folder = upload_dir(svc.settings, None if target == svc.settings.collection else target)
    with svc.upload_lock:  # two uploads of one name must not interleave write and index
        app = svc.pool.ingester(target) if not creating else None
        before = {n: _present(app, folder, n) for n in names}
        for name, present in before.items():
            if present:
                check_replace(who, name, target)
        if cap is not None:  # on the record before the collection exists: two replicas share one cap
            _claim(svc, who, target, cap)
        else:  # no upload off the record: a ledger that cannot take its audit row refuses it now (503)
            svc.read(lambda L: L.any_keys(), flush=False)
        app = app or svc.pool.ingester(target)
        app.require_space(sum(upload_size(f) for f in files))  # 507 before anything is written
        out = save_uploads(files, svc.settings, lambda paths: app.ingest_uploads(paths),
                           None if target == svc.settings.collection else target)
        _audit(svc, who, target, zip(names, out), before)
        return {"files": out}


def _present(app, folder: Path, name: str) -> list[tuple[str, str]] | None:
    """What an upload named `name` would take the place of ((doc_id, source) pairs), or None: a document of
    that file name in the collection, or a stored upload of that name (its folder mirrors the store)."""
    stored = stored_name(name)
    found = app.documents_named(stored) if app is not None else []
    if found or (folder / stored).exists():
        return found or [("", str(folder / stored))]
    return None


def _claim(svc: ServiceState, who: Principal, collection: str, cap: int) -> None:
    row = {"at": stamp(datetime.now(UTC)), "actor": who.name or "open", "action": "create_collection",
           "target": collection, "detail": json.dumps({"user": who.user, "max_collections": cap}, ensure_ascii=False)}
    if not svc.read(lambda L: L.claim_collection(row["actor"], collection, cap, row), flush=False):
        raise Forbidden(f"API key {who.name!r} has created its {cap} collections (--max-collections); "
                        f"collection {collection[:80]!r} is not created")


def _audit(svc: ServiceState, who: Principal, collection: str, uploads, before: dict) -> None:
    """One audit row per file stored (written, or unchanged and so re-confirmed): `upload`, or `replace`
    with the id of the document it took the place of."""
    at, rows = stamp(datetime.now(UTC)), []
    for name, o in uploads:
        if o["status"] not in ("written", "unchanged"):
            continue
        ids = [doc for doc, _ in before.get(name) or () if doc]
        replaced = (o.get("replaced") or {}).get("doc_id") or (ids[0] if len(ids) == 1 else None)
        rows.append({"at": at, "actor": who.name or "open", "action": "replace" if before.get(name) else "upload",
                     "target": name, "detail": json.dumps(
                         {"user": who.user, "collection": collection, "file": name, "sha256": o["sha256"],
                          "replaced_doc_id": replaced, "status": o["status"], "chunks": o["chunks"]},
                         ensure_ascii=False)})
    for r in rows:  # the log says it too: who put which text in front of the collection's readers
        log.info("%s by key %s: %s", r["action"], r["actor"], r["detail"])
    try:
        svc.read(lambda L: L.add_audits(rows), flush=False)
    except Exception as e:  # the files are in (the ledger answered a moment ago): the log names who and what
        log.error("upload audit rows not written (%s): %s", getattr(e, "detail", e),
                  json.dumps(rows, ensure_ascii=False))


def upload_size(f: UploadFile) -> int:
    if f.size is not None:
        return f.size
    f.file.seek(0, 2)
    size = f.file.tell()
    f.file.seek(0)
    return size
