"""/v1/ingest: uploaded files saved under the data dir and indexed, each known by its name."""
from __future__ import annotations

from fastapi import APIRouter, File, Form, HTTPException, UploadFile

from rag_app.access.rights import check_ingest
from rag_app.core.errors import StoreError
from rag_app.store.base import check_name
from rag_app.service.deps import Authed, Caller, Svc
from rag_app.service.inputs import save_uploads

router = APIRouter(dependencies=Authed)


@router.post("/v1/ingest")
def ingest(svc: Svc, who: Caller, files: list[UploadFile] = File(...), collection: str | None = Form(None)):
    """Each file is known by its name: uploading `劳动法.md` again replaces its old chunks. `collection`
    (a form field; default RAG_COLLECTION) is where they go. Needs an admin key, or a member key created
    with --ingest that may read that collection."""
    target = svc.settings.collection if collection is None else collection
    try:
        check_name(target)
    except StoreError as e:
        raise HTTPException(422, f"collection: {e}") from None
    check_ingest(who, target)
    app = svc.pool.ingester(target)
    with svc.upload_lock:  # two uploads of one name must not interleave write and index
        app.require_space(sum(upload_size(f) for f in files))  # 507 before anything is written
        return {"files": save_uploads(files, svc.settings, lambda paths: app.ingest_uploads(paths),
                                      None if target == svc.settings.collection else target)}


def upload_size(f: UploadFile) -> int:
    if f.size is not None:
        return f.size
    f.file.seek(0, 2)
    size = f.file.tell()
    f.file.seek(0)
    return size
