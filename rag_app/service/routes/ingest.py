"""/v1/ingest: uploaded files saved under the data dir and indexed, each known by its name."""
from __future__ import annotations

from fastapi import APIRouter, File, UploadFile

from rag_app.access.rights import check_ingest
from rag_app.service.deps import Authed, Caller, Svc
from rag_app.service.inputs import save_uploads

router = APIRouter(dependencies=Authed)


@router.post("/v1/ingest")
def ingest(svc: Svc, who: Caller, files: list[UploadFile] = File(...)):
    """Each file is known by its name: uploading `劳动法.md` again replaces its old chunks. Needs an admin
    key, or a member key created with --ingest that may read the collection."""
    check_ingest(who, svc.settings.collection)
    with svc.upload_lock:  # two uploads of one name must not interleave write and index
        svc.pool.base.require_space(sum(upload_size(f) for f in files))  # 507 before anything is written
        return {"files": save_uploads(files, svc.settings, lambda paths: svc.pool.base.ingest_uploads(paths))}


def upload_size(f: UploadFile) -> int:
    if f.size is not None:
        return f.size
    f.file.seek(0, 2)
    size = f.file.tell()
    f.file.seek(0)
    return size
