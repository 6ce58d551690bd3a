"""Turn one file into a ParsedDocument.

Markdown and plain text are their own parsed text: chunk offsets then index the source file's
characters exactly, which evaluation against gold spans needs. PDF, DOCX and HTML go through
`unstructured` (PDF with strategy="fast", page numbers kept); their parsed text is the elements'
text joined by blank lines, tables rendered as Markdown.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

from rag_app.errors import EmptyDocument, IngestError, UnsupportedFormat
from rag_app.ingest.pdftext import restore_lines
from rag_app.ingest.tables import html_table_to_markdown
from rag_app.ingest.textdecode import decode_text
from rag_app.types import Block, ParsedDocument

FORMATS = {".pdf": "pdf", ".docx": "docx", ".html": "html", ".htm": "html",
           ".md": "markdown", ".markdown": "markdown", ".txt": "text"}
_TABLE_LINE = re.compile(r"^\s*\|.*\|\s*$")


def supported(path: Path) -> bool:
    return path.suffix.lower() in FORMATS


def doc_id_for(path: Path) -> str:
    return hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]


def load_document(path: Path) -> ParsedDocument:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise UnsupportedFormat(str(path), f"unsupported file type {path.suffix or '(none)'}",
                                f"supported: {', '.join(sorted(FORMATS))}")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise IngestError(str(path), f"cannot read file ({e.strerror})") from e
    if not data.strip():
        raise EmptyDocument(str(path), "file is empty", "remove it or add content")
    content_hash = hashlib.sha256(data).hexdigest()
    if fmt in ("markdown", "text"):
        text, enc = decode_text(data, str(path))
        blocks = text_blocks(text)
        title = _markdown_title(text) if fmt == "markdown" else _first_line_title(text)
    else:
        text, blocks, title = _partition(path, fmt, data)
        enc = None
    if not text.strip() or not blocks:
        raise EmptyDocument(str(path), "no text could be extracted",
                            "a scanned PDF needs OCR first; otherwise check the file opens")
    return ParsedDocument(source_path=str(path.resolve()), doc_id=doc_id_for(path),
                          content_hash=content_hash, title=title or path.stem, text=text,
                          blocks=tuple(blocks), format=fmt, encoding=enc)


def text_blocks(text: str, page: int | None = None, base: int = 0) -> list[Block]:
    """One block per non-blank line; a run of `| … |` lines is one table block."""
    blocks: list[Block] = []
    pos = 0
    table_start = table_end = None
    for line in text.splitlines(keepends=True):
        start, end = pos, pos + len(line.rstrip("\r\n"))
        pos += len(line)
        is_table = bool(_TABLE_LINE.match(line))
        if is_table:
            table_start = start if table_start is None else table_start
            table_end = end
            continue
        if table_start is not None:
            blocks.append(Block(base + table_start, base + table_end, "table", page))
            table_start = None
        if line.strip():
            blocks.append(Block(base + start, base + end, "text", page))
    if table_start is not None:
        blocks.append(Block(base + table_start, base + table_end, "table", page))
    return blocks


def _markdown_title(text: str) -> str:
    for line in text.splitlines()[:20]:
        if line.startswith("# "):
            return line[2:].strip()
    return _first_line_title(text)


def _first_line_title(text: str, short_only: bool = False) -> str:
    for line in text.splitlines()[:5]:
        line = line.strip()
        if line:
            if short_only and (len(line) > 60 or line.endswith(("。", "；", "."))):
                return ""
            return line[:120]
    return ""


def _partition(path: Path, fmt: str, data: bytes) -> tuple[str, list[Block], str]:
    from rag_app.ingest import unstructured_setup

    unstructured_setup.configure()
    if fmt == "pdf" and not data.startswith(b"%PDF"):
        raise IngestError(str(path), "not a PDF file (missing %PDF header)",
                          "the file is corrupt or mis-named; re-export it")
    try:
        if fmt == "pdf":
            from unstructured.partition.pdf import partition_pdf
            elements = partition_pdf(filename=str(path), strategy="fast")
        elif fmt == "docx":
            from unstructured.partition.docx import partition_docx
            elements = partition_docx(filename=str(path))
        else:
            from unstructured.partition.html import partition_html
            text, _ = decode_text(data, str(path))
            elements = partition_html(text=text)
    except IngestError:
        raise
    except Exception as e:  # parser libraries raise anything; one boundary translates it
        raise IngestError(str(path), f"cannot parse {fmt.upper()} ({type(e).__name__}: {e})",
                          "the file is corrupt or password-protected; re-export it") from e
    parts: list[str] = []
    blocks: list[Block] = []
    pos = 0
    title = ""
    for el in elements:
        category = getattr(el, "category", "")
        page = getattr(el.metadata, "page_number", None)
        if category == "Table":
            html = getattr(el.metadata, "text_as_html", None)
            body = html_table_to_markdown(html) if html else el.text
            kind = "table"
        else:
            body, kind = (restore_lines(el.text) if fmt == "pdf" else el.text), "text"
        body = body.strip()
        if not body:
            continue
        if category == "Title" and not title and len(body) <= 120:
            title = body
        if parts:
            parts.append("\n\n")
            pos += 2
        if kind == "table":
            blocks.append(Block(pos, pos + len(body), "table", page))
        else:  # an element may hold several lines (a paragraph per line in DOCX)
            blocks.extend(text_blocks(body, page, base=pos))
        parts.append(body)
        pos += len(body)
    text = "".join(parts)
    return text, blocks, title or _first_line_title(text, short_only=True)
