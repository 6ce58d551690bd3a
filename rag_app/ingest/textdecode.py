"""Bytes -> str for text formats: UTF-8 first, then GB18030 (superset of GBK/GB2312), then a guess."""
from __future__ import annotations

from charset_normalizer import from_bytes

from rag_app.errors import IngestError


def looks_binary(data: bytes) -> bool:
    sample = data[:8192]
    return b"\x00" in sample


def decode_text(data: bytes, path: str) -> tuple[str, str]:
    if looks_binary(data):
        raise IngestError(path, "file looks binary (NUL bytes), not text",
                          "check the extension: only PDF, DOCX, HTML, Markdown and text are supported")
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8"), "utf-8-sig"
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        # Chinese legal text outside UTF-8 is almost always GBK/GB18030; try it before guessing.
        return data.decode("gb18030"), "gb18030"
    except UnicodeDecodeError:
        pass
    best = from_bytes(data).best()
    if best is None:
        raise IngestError(path, "cannot detect the text encoding",
                          "re-save the file as UTF-8")
    return str(best), best.encoding
