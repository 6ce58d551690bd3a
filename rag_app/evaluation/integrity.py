"""Chunk quality measures that need no questions: sentence and article integrity, size stats."""
from __future__ import annotations

import re
import statistics
from collections.abc import Sequence

from rag_app.chunking import TABLE_PREFIX
from rag_app.text import count_tokens
from rag_app.core import Chunk, ParsedDocument

_SENT_END = "。！？；!?;.:：”’」）)"
_WS = " \t\r\n\u3000\u200b"
_ARTICLE = re.compile(r"^第[一二三四五六七八九十百千零]+\s*条", re.M)
_ARTICLE_END = re.compile(r"^(第[一二三四五六七八九十百千零]+\s*条|#|附件|<!--)", re.M)


def _starts_sentence(text: str, pos: int) -> bool:
    before = text[:pos].rstrip(_WS)
    return not before or pos == 0 or text[pos - 1] == "\n" or before[-1] in _SENT_END or "\n" in text[len(before):pos]


def _ends_sentence(text: str, end: int) -> bool:
    body = text[:end].rstrip(_WS)
    after = text[end:end + 2]
    return not body or body[-1] in _SENT_END or after.startswith("\n") or end >= len(text) or body[-1] == "|"


def sentence_integrity(doc: ParsedDocument, chunks: Sequence[Chunk]) -> tuple[int, int]:
    ok = sum(_starts_sentence(doc.text, c.char_start) and _ends_sentence(doc.text, c.char_end) for c in chunks)
    return ok, len(chunks)


def article_spans(text: str):
    """Articles found independently of any chunker: a line-start 第X条 up to the next boundary line."""
    bounds = sorted({m.start() for m in _ARTICLE_END.finditer(text)} | {len(text)})
    for m in _ARTICLE.finditer(text):
        end = next(b for b in bounds if b > m.start())
        yield m.start(), m.start() + len(text[m.start():end].rstrip(_WS))


def article_integrity(doc: ParsedDocument, chunks: Sequence[Chunk], hard_max: int) -> tuple[int, int]:
    """(articles inside one chunk, articles considered) — articles longer than the hard max left out."""
    ok = total = 0
    spans = sorted((c.char_start, c.char_end) for c in chunks)
    for s, e in article_spans(doc.text):
        if count_tokens(doc.text[s:e]) > hard_max:
            continue
        total += 1
        ok += any(a <= s and e <= b for a, b in spans)
    return ok, total


def size_stats(chunks: Sequence[Chunk], target: tuple[int, int]) -> dict:
    toks = sorted(c.token_count for c in chunks) or [0]
    p95 = toks[min(len(toks) - 1, int(round(0.95 * (len(toks) - 1))))]
    inside = sum(target[0] <= t <= target[1] for t in toks)
    return {"chunks": len(chunks), "mean_tokens": round(statistics.mean(toks), 1),
            "median_tokens": statistics.median(toks), "p95_tokens": p95,
            "pct_in_target": round(100 * inside / len(toks), 1)}


def body(c: Chunk) -> str:
    return c.text[len(TABLE_PREFIX):] if c.kind == "table" else c.text
