"""What the service accepts from outside and what it shows back: validated, bounded, server paths hidden.

Uploads are stored under their own name (`uploads/劳动法.md`), so the name is the document's
identity: a second upload of that name replaces the first one's chunks, as `rag ingest PATH` does.
"""
from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Annotated, Literal

from fastapi.exceptions import RequestValidationError
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from rag_app.config import Settings
from rag_app.core import stamp
from rag_app.text import EdgeText, shown_name
from rag_app.ingest import FORMATS

MAX_NAME_BYTES = 200  # file systems stop at 255 bytes; a longer upload name was a 500 for the batch
_UNSAFE = re.compile(r"[^\w.\-\u4e00-\u9fff（）()]")
_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)


def _utc_timestamp(v: str) -> str:
    try:
        t = datetime.fromisoformat(v)
    except ValueError:
        raise ValueError("not an ISO-8601 timestamp; use e.g. 2026-11-30 or 2026-11-30T15:00:00Z") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    try:
        return stamp(t)  # the ledger's own format
    except OverflowError:  # 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        raise ValueError("outside the years 1-9999 once converted to UTC; use e.g. 2026-11-30T15:00:00Z") from None


Timestamp = Annotated[str, AfterValidator(_utc_timestamp)]


class AskScope(BaseModel):
    """Documents to search within: file names, titles or ids (`docs`), law titles or short names (`laws`)."""
    # a misspelled key ("doc") was ignored and the answer drawn from the whole collection: refuse it
    model_config = ConfigDict(extra="forbid")
    docs: list[EdgeText] = Field(default_factory=list, max_length=50)
    laws: list[EdgeText] = Field(default_factory=list, max_length=50)


class FeedbackRequest(BaseModel):
    """A user's word on an answer: -1 wrong, 0 unsure, 1 right, and why."""
    model_config = ConfigDict(extra="forbid")
    score: Literal[-1, 0, 1]
    comment: EdgeText | None = Field(None, max_length=2000)
    user_id: EdgeText | None = Field(None, max_length=200)


def public_validation_errors(exc: RequestValidationError) -> list[dict]:
    """Field and reason only: echoing the input sent a 1 MB question back (and a lone surrogate broke it).
    `field` names it as a client writes it (`messages[0].content[1].text`), without pydantic's union tags."""
    out = []
    for e in exc.errors()[:20]:
        loc = [x for x in e.get("loc", ()) if not (isinstance(x, str) and ("[" in x or x.startswith("function-")))]
        out.append({"loc": [str(x)[:100] for x in loc], "field": _field(loc),
                    "msg": _printable(str(e.get("msg", "")))[:300], "type": e.get("type")})
    return out


def _field(loc: list) -> str:
    parts = loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc
    text = ""
    for x in parts:
        text += f"[{x}]" if isinstance(x, int) else ("." if text else "") + _printable(str(x))[:100]
    return text or "body"


def dashboard_headers(page: str) -> dict[str, str]:
    """CSP that admits exactly the page's own inline script (by hash) and its own script files (/dashboard/*.js),
    and no framing."""
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'"
                      for s in _SCRIPT.findall(page))
    csp = (f"default-src 'none'; script-src 'self' {hashes}; style-src 'unsafe-inline'; connect-src 'self'; "
           "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    return {"Content-Security-Policy": csp, "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer"}


def public_message(message: str, data_dir: Path) -> str:
    """An error message as clients may see it: the data dir shown as `RAG_DATA_DIR`, not where
    the server keeps it (a damaged store's error names the file to the operator all the same)."""
    return message.replace(str(Path(data_dir).resolve()), "RAG_DATA_DIR")


def _printable(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


def _stored_name(display: str) -> str:
    safe = _UNSAFE.sub("_", display).lstrip(".") or "upload"
    stem, suffix = safe[: len(safe) - len(Path(safe).suffix)], Path(safe).suffix[:16]
    while len((stem + suffix).encode("utf-8")) > MAX_NAME_BYTES:
        stem = stem[:-1]
    return stem + suffix


def upload_name(f) -> str:
    """An upload's name as the service knows and shows it: the file name alone (no folders), valid text,
    its bidirectional controls written as visible escapes (`evil\\u202e.md`, never a reversed name)."""
    return shown_name(_printable(PurePosixPath((f.filename or "upload").replace("\\", "/")).name or "upload"))


def upload_dir(settings: Settings, collection: str | None) -> Path:
    """Where uploads into `collection` are kept (None, RAG_COLLECTION: `uploads/`, its old place)."""
    return settings.data_dir / ("uploads" if collection is None else f"uploads@{collection}")


def stored_name(name: str) -> str:
    """The file name an upload named `name` is stored under (and known by in the store)."""
    return _stored_name(name)


def save_uploads(files, settings: Settings, ingest: Callable, collection: str | None = None) -> list[dict]:
    """Write each acceptable upload under its name, ingest them as one batch, report per file.

    A rejected file is removed from disk, and a replaced file's previous version comes back if
    the new one fails, so the folder always mirrors what the store holds.
    """
    # one folder per collection (RAG_COLLECTION's keeps its old place): the folder mirrors its store
    folder = upload_dir(settings, collection)
    folder.mkdir(parents=True, exist_ok=True)
    outcomes: list[dict] = []
    saved: list[tuple[str, Path, Path | None]] = []  # (display name, stored path, previous version)
    digests: dict[int, str] = {}  # each upload's SHA-256, by its place in the reply (the audit row's)
    slots: list[int] = []  # where each saved file's outcome goes, so replies keep the request's order
    for f in files:
        shown, target, data, error = _accepted(f, settings, folder, [t for _, t, _ in saved])
        if error is None:
            digests[len(outcomes)] = hashlib.sha256(data).hexdigest()
            previous = target.with_name(target.name + ".previous") if target.exists() else None
            try:
                if previous:
                    target.replace(previous)
                target.write_bytes(data)
                saved.append((shown, target, previous))
                slots.append(len(outcomes))
                outcomes.append({})
                continue
            except OSError as e:
                error = f"cannot store the upload ({e.strerror}); check free space and permissions of the data dir"
                _restore(target, previous)
        outcomes.append(_outcome(shown, "error", error=error))
    if saved:
        try:
            report = ingest([p for _, p, _ in saved])
        except BaseException:
            for _, target, previous in saved:
                _restore(target, previous)
            raise
        by_path = {Path(o.path).resolve(): o for o in report.outcomes}
        for slot, (shown, target, previous) in zip(slots, saved):
            outcomes[slot] = _settled(by_path.get(target.resolve()), shown, target, previous)
    return [{**o, "sha256": digests.get(i)} for i, o in enumerate(outcomes)]


def _accepted(f, settings: Settings, upload_dir: Path, taken: list[Path]) -> tuple[str, Path, bytes, str | None]:
    """(the name shown, where it is stored, its bytes, why it is refused or None)."""
    limit = int(settings.max_upload_mb * 2**20)
    name = upload_name(f)
    shown = name if len(name) <= 120 else name[:100] + "…" + name[-12:]
    suffix = Path(name).suffix.lower()
    data = f.file.read(limit + 1)
    target = upload_dir / _stored_name(name)
    error = None
    if suffix not in FORMATS:
        error = f"unsupported file type {suffix[:16] or '(none)'}; supported: {', '.join(sorted(FORMATS))}"
    elif len(data) > limit:
        error = f"larger than {settings.max_upload_mb:g} MB (RAG_MAX_UPLOAD_MB)"
    elif target in taken:
        error = "a file of the same name is already in this request; send one version"
    return shown, target, data, error


def _settled(o, shown: str, target: Path, previous: Path | None) -> dict:
    """A stored upload's outcome after ingest: a failed one gives way to its previous version."""
    status = o.status if o else "error"
    error = (o.error if o else "not processed") or None
    if error:
        error = error.replace(str(target.resolve()), shown).replace(str(target), shown)
    if status == "error":
        _restore(target, previous)
    elif previous:
        previous.unlink(missing_ok=True)
    if o is None:
        return _outcome(shown, status, error=error)
    return _outcome(shown, status, chunks=o.chunks, error=error, warning=o.warning, replaced=o.replaced)


def _outcome(shown: str, status: str, *, chunks: int = 0, error: str | None = None, warning: str | None = None,
             replaced: str | None = None) -> dict:
    return {"file": shown, "status": status, "chunks": chunks, "error": error, "warning": warning,
            "replaced": replaced}


def _restore(target: Path, previous: Path | None) -> None:
    target.unlink(missing_ok=True)
    if previous is not None and previous.exists():
        previous.replace(target)
