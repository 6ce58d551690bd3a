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

from rag_app.core import EmptyDocument, IngestError, UnsupportedFormat
from rag_app.ingest.pdftext import restore_lines
from rag_app.ingest.tables import html_table_to_markdown
from rag_app.ingest.textdecode import decode_text
from rag_app.core import Block, ParsedDocument

FORMATS = {".pdf": "pdf", ".docx": "docx", ".html": "html", ".htm": "html",
           ".md": "markdown", ".markdown": "markdown", ".txt": "text"}
_TABLE_LINE = re.compile(r"^\s*\|.*\|\s*$")


def supported(path: Path) -> bool:
    return path.suffix.lower() in FORMATS


def doc_id_for(path: Path) -> str:
    return hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]


def import_parser(fmt: str) -> None:
    """Import what parsing `fmt` needs (the sandbox does this before it caps the memory)."""
    if fmt in ("pdf", "docx", "html"):
        from rag_app.ingest import unstructured_setup

        unstructured_setup.configure()
        if fmt == "pdf":
            import unstructured.partition.pdf  # noqa: F401
        elif fmt == "docx":
            import unstructured.partition.docx  # noqa: F401
        else:
            import unstructured.partition.html  # noqa: F401


def load_document(path: Path, *, max_uncompressed_mb: float | None = None) -> ParsedDocument:
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
        if fmt == "docx" and max_uncompressed_mb is not None:
            check_zip_sizes(path, max_uncompressed_mb)
        text, blocks, title = _partition(path, fmt, data)
        enc = None
    if not text.strip() or not blocks:
        raise EmptyDocument(str(path), "no text could be extracted",
                            "a scanned PDF needs OCR first; otherwise check the file opens" if fmt == "pdf"
                            else f"check that the {fmt.upper() if fmt in ('docx', 'html') else fmt} file opens and holds text")
    return ParsedDocument(source_path=str(path.resolve()), doc_id=doc_id_for(path),
                          content_hash=content_hash, title=title or path.stem, text=text,
                          blocks=tuple(blocks), format=fmt, encoding=enc)


def check_zip_sizes(path: Path, max_mb: float) -> None:
    """Refuse a DOCX whose parts inflate past the budget before anything decompresses them."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            members = z.infolist()
    except (zipfile.BadZipFile, OSError) as e:
        raise IngestError(str(path), f"not a DOCX file (not a zip archive: {e})",
                          "the file is corrupt or mis-named; re-save it from Word") from e
    total = sum(m.file_size for m in members)
    if total > max_mb * 1024 * 1024:
        biggest = max(members, key=lambda m: m.file_size)
        raise IngestError(str(path), f"unpacks to {total / 2**20:.0f} MB ({biggest.filename}: "
                                     f"{biggest.file_size / 2**20:.0f} MB from {biggest.compress_size / 2**10:.0f} KB), "
                                     f"over the {max_mb:g} MB allowed (RAG_PARSE_MAX_MB / 4)",
                          "a zip bomb or a bloated export; re-save the document, or split it")


MAX_HTML_DEPTH = 256


def check_html_depth(path: Path, text: str) -> None:
    """Deep nesting makes the HTML parser drop everything; say so instead of "no text"."""
    depth = deepest = 0
    for m in _TAG.finditer(text):
        if m.group(1):
            depth = max(depth - 1, 0)
        elif not m.group(3) and m.group(2).lower() not in _VOID_TAGS:
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_HTML_DEPTH:
                raise IngestError(str(path), f"HTML elements nest deeper than {MAX_HTML_DEPTH} levels",
                                  "flatten the markup (or save the page as text) and ingest again")


_TAG = re.compile(r"<(/)?([a-zA-Z][a-zA-Z0-9]*)[^<>]*?(/)?>")
_VOID_TAGS = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr",
              "p", "li", "td", "th", "tr", "option"}  # p/li/td…: often left unclosed, never counted as depth


def no_chunks_error(path: str, doc: ParsedDocument) -> IngestError:
    """Why a parsed document gave no chunk, in terms of its own text."""
    lines = [ln.strip() for ln in doc.text.splitlines() if ln.strip()]
    if all(ln.startswith("#") or ln == doc.title for ln in lines):
        return EmptyDocument(path, f"only a title or headings ({lines[0][:60]!r}), no body text",
                             "add the document's body text below its title")
    return EmptyDocument(path, f"{len(doc.text)} characters in {len(lines)} line(s) but nothing the chunker keeps "
                               "(only comments, blank markup or the title)", "add the document's body text")


def text_blocks(text: str, page: int | None = None, base: int = 0) -> list[Block]:
    """One block per non-blank line; a run of `| … |` lines is one table block."""
    blocks: list[Block] = []
    pos = 0
    table_start: int | None = None
    table_end = 0
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


_BODY_LINE = re.compile(r"^第[一二三四五六七八九十百千零〇\d]+条|[。；;.!?！？]$")


def _first_line_title(text: str, short_only: bool = False) -> str:
    """The first line, unless it reads as body text (a sentence, or an article `第X条 …`): then the
    caller falls back to the file name, and a one-line file is indexed instead of being all title."""
    for line in text.splitlines()[:5]:
        line = line.strip()
        if line:
            if _BODY_LINE.search(line) or (short_only and len(line) > 60):
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
            check_html_depth(path, text)
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
