"""Bytes -> str for text formats: UTF-8 first, then GB18030 (superset of GBK/GB2312), then a guess."""
from __future__ import annotations

from charset_normalizer import from_bytes

from rag_app.core import IngestError


DECLARED = ("utf-8", "utf-8-sig", "gb18030", "utf-16")  # what decode_text reads without guessing


def guessed_note(encoding: str | None) -> str | None:
    """The warning a file decoded by charset_normalizer's guess carries (a Latin-1 file came out as
    cp1257 mojibake, ingested in silence): None for the encodings decode_text knows for sure."""
    if encoding is None or encoding in DECLARED:
        return None
    return f"not UTF-8 or GB18030: decoded as {encoding} by guess; if its text looks wrong, re-save it as UTF-8"


def looks_binary(data: bytes) -> bool:
    sample = data[:8192]
    return b"\x00" in sample


def _utf16(data: bytes) -> str | None:
    """UTF-16 with a BOM, or without one when it decodes to printable text (ASCII and CJK alike)."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    if len(data) % 2:
        return None
    for enc in ("utf-16-le", "utf-16-be"):
        try:
            sample = data[:8192].decode(enc, errors="replace")  # the cut may split a pair
        except UnicodeDecodeError:
            continue
        printable = sum(c.isprintable() or c in "\r\n\t" for c in sample)
        if printable >= 0.98 * len(sample):
            try:
                return data.decode(enc)
            except UnicodeDecodeError:
                return None
    return None


def decode_text(data: bytes, path: str) -> tuple[str, str]:
    if data[:2] in (b"\xff\xfe", b"\xfe\xff") or looks_binary(data):
        text = _utf16(data)
        if text is not None:
            return text.lstrip("\ufeff"), "utf-16"
        raise IngestError(path, "file looks binary (NUL bytes, and not UTF-16 text)",
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
