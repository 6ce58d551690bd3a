"""Context formatting, citations and the extractive answer (no LLM configured)."""
from __future__ import annotations

import re

from rag_app.types import Citation, ScoredChunk

_MARKER = re.compile(r"\[(\d{1,2})\]")


def passage_label(sc: ScoredChunk) -> str:
    c = sc.chunk
    where = "、".join(c.articles) or " / ".join(c.heading_path) or "—"
    page = f" p.{c.page}" if c.page else ""
    return f"《{c.title}》{where}{page}"


def format_context(contexts: list[ScoredChunk]) -> str:
    return "\n\n".join(f"[{i}] {passage_label(sc)}\n{sc.chunk.text}" for i, sc in enumerate(contexts, 1))


def citation_for(sc: ScoredChunk) -> Citation:
    c = sc.chunk
    return Citation(law=c.title, articles=c.articles, doc=c.source_path, chunk_id=c.chunk_id, page=c.page)


def cited_contexts(answer: str, contexts: list[ScoredChunk]) -> list[ScoredChunk]:
    """The passages an LLM answer points at with [n]; all passages if it cites none."""
    picked = [int(n) for n in _MARKER.findall(answer) if 1 <= int(n) <= len(contexts)]
    return [contexts[i - 1] for i in dict.fromkeys(picked)] or list(contexts)


def extractive_answer(contexts: list[ScoredChunk], max_chars: int = 400) -> str:
    if not contexts:
        return "未检索到相关条文。No matching provisions were found."
    lines = ["（抽取式回答：未配置 LLM，以下为最相关的条文原文 / extractive mode: top passages, no generation）"]
    for i, sc in enumerate(contexts, 1):
        text = sc.chunk.text.strip()
        lines.append(f"[{i}] {passage_label(sc)}：{text[:max_chars]}{'…' if len(text) > max_chars else ''}")
    return "\n".join(lines)
