"""Context formatting, citations and the extractive answer (no LLM configured)."""
from __future__ import annotations

import re
from collections.abc import Sequence

from rag_app.query.excerpt import Excerpt, best_excerpt, ends_sentence, section_at, sections_in
from rag_app.core import Citation, ScoredChunk

_MARKER = re.compile(r"\[(\d{1,2})\]")
_CJK = re.compile(r"[\u3400-\u9fff]")

# Tokens of one passage in an extractive answer: about one chunk (RAG_CHUNK_TARGET_MAX is 250), so most
# passages show whole and a long or merged one shows its best sentences. Measured on the chunk holding
# each gold span (bench/extractive_shown.py --chunks): legal_en 0.451 -> 0.934 of spans shown (first
# 400 characters before), legal_zh 0.975 -> 0.970 (no difference; it showed ~215 tokens, now ~199).
# The whole answer stays within RAG_CONTEXT_TOKENS because the passages were packed within it.
EXCERPT_TOKENS = 256


def title_label(title: str) -> str:
    """《公司法》 for a Chinese title; an English title as the document writes it."""
    return f"《{title}》" if _CJK.search(title) else title


def passage_label(sc: ScoredChunk, section: str | None = None) -> str:
    c = sc.chunk
    where = section or "、".join(c.articles) or " / ".join(c.heading_path) or section_at(c.text, 0)
    page = f" p.{c.page}" if c.page else ""
    if _CJK.search(c.title):
        return f"《{c.title}》{where or '—'}{page}"
    return f"{c.title}{', ' + section_mark(where) if where else ''}{page}"


def section_mark(section: str) -> str:
    """`§10` for a bare section number (`10, 11` -> `§10, §11`); `ARTICLE IV`, `第二十条` as written."""
    return ", ".join(f"§{s}" if s[:1].isdigit() else s for s in section.split(", "))


def format_context(contexts: list[ScoredChunk]) -> str:
    return "\n\n".join(f"[{i}] {passage_label(sc)}\n{sc.chunk.text}" for i, sc in enumerate(contexts, 1))


def citation_for(sc: ScoredChunk, excerpt: Excerpt | None = None) -> Citation:
    """The passage's citation: its sections and whole range; with `excerpt`, the range of the text shown and
    the section of the sentence in it that answers (the provision a reader would cite)."""
    c = sc.chunk
    fallback = c.articles or c.heading_path[-1:]
    if excerpt is None:
        start, end, section = 0, len(c.text), sections_in(c.text, 0, len(c.text), fallback)
    else:
        start, end, section = excerpt.start, excerpt.end, section_at(c.text, excerpt.anchor, fallback)
    char_start, char_end = document_range(sc, start, end)
    return Citation(law=c.title, articles=c.articles, doc=c.source_path, chunk_id=c.chunk_id, page=c.page,
                    section=section, char_start=char_start, char_end=char_end,
                    label=cited_where(c.title, section or "、".join(c.articles), c.page))


def cited_where(title: str, where: str, page: int | None) -> str:
    """Where a citation lies, for people: `《公司法》第二十条 p.3` / `NON-DISCLOSURE AGREEMENT §10 p.3`."""
    on_page = f" p.{page}" if page else ""
    if title_label(title).startswith("《"):
        return f"{title_label(title)}{where}{on_page}"
    return f"{title}{' ' + section_mark(where) if where else ''}{on_page}"


def document_range(sc: ScoredChunk, start: int, end: int) -> tuple[int, int]:
    """Offsets in the passage text -> offsets in its document. A passage is an exact slice of the
    document except after a small-to-big merge across a 2-character gap (context.merge_chunks joins
    with one line break): then the whole passage's range, which still contains the text."""
    c = sc.chunk
    if len(c.text) != c.char_end - c.char_start:
        return c.char_start, c.char_end
    return c.char_start + start, c.char_start + end


def marked_contexts(answer: str, contexts: Sequence[ScoredChunk]) -> list[ScoredChunk]:
    """The passages an LLM answer points at with [n], in order; a mark past the passages sent is none."""
    picked = [int(n) for n in _MARKER.findall(answer) if 1 <= int(n) <= len(contexts)]
    return [contexts[i - 1] for i in dict.fromkeys(picked)]


def cited_contexts(answer: str, contexts: list[ScoredChunk]) -> list[ScoredChunk]:
    """The passages an LLM answer points at with [n]; all passages if it cites none (shown as sources)."""
    return marked_contexts(answer, contexts) or list(contexts)


def extractive_answer(contexts: list[ScoredChunk], question: str = "",
                      max_tokens: int = EXCERPT_TOKENS) -> tuple[str, tuple[Citation, ...]]:
    """Each passage's sentences that best cover the question, within `max_tokens`, and their citations."""
    if not contexts:
        return "未检索到相关条文。No matching provisions were found.", ()
    lines = ["（抽取式回答：未配置 LLM，以下为最相关的条文原文 / extractive mode: top passages, no generation）"]
    citations = []
    for i, sc in enumerate(contexts, 1):
        text = sc.chunk.text
        ex = best_excerpt(text, question, max_tokens, sc.chunk.token_count)
        cite = citation_for(sc, ex)
        before = "…" if text[:ex.start].strip() else ""
        # a passage the packer cut at the budget ends mid-sentence: say so
        after = "…" if ex.cut or text[ex.end:].strip() or not ends_sentence(ex.text) else ""
        lines.append(f"[{i}] {passage_label(sc, cite.section)}：{before}{ex.text}{after}")
        citations.append(cite)
    return "\n".join(lines), tuple(citations)
