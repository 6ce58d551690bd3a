"""Domain values passed between stages. Frozen: a stage returns new values, never mutates."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from rag_app.core.usage import StageUsage


# a line that opens an article of a Chinese statute: 第五十七条, 第一百三十三条之一
_ARTICLE_LINE = re.compile(r"^\s*第[一二三四五六七八九十百千零〇\d]+\s*条(?:之[一二三四五六七八九十]+)?")


@dataclass(frozen=True)
class Block:
    """One element of a parsed document: a paragraph line or a whole table.

    `start`/`end` are code-point offsets into `ParsedDocument.text`.
    """

    start: int
    end: int
    kind: str = "text"  # "text" | "table"
    page: int | None = None


@dataclass(frozen=True)
class ParsedDocument:
    """What a loader returns: exact text plus where each block lies in it."""

    source_path: str
    doc_id: str
    content_hash: str
    title: str
    text: str
    blocks: tuple[Block, ...]
    format: str
    encoding: str | None = None


@dataclass(frozen=True)
class Chunk:
    doc_id: str
    source_path: str
    title: str
    text: str
    char_start: int
    char_end: int
    token_count: int
    chunker: str
    chunker_version: str
    heading_path: tuple[str, ...] = ()
    articles: tuple[str, ...] = ()
    article_nums: tuple[str, ...] = ()  # "57", "133-1" (之一) — normalised for matching
    page: int | None = None
    kind: str = "text"  # "text" | "table"
    chunk_id: str = ""
    refs: tuple[str, ...] = ()  # article keys this chunk cites inside its own law (crossref.py)
    doc_type: str = "other"  # statute | contract | other: the document's type, decided at ingest (doctype.py)
    # sparse.TermCounts of indexed_text(), counted in the parse worker under the per-file budget;
    # None when the chunk was made elsewhere (then the indexer counts them itself). Never stored.
    terms: Any = field(default=None, compare=False, repr=False)

    def indexed_text(self) -> str:
        """What embedding and BM25 see: the chunk prefixed with its law title and heading path.

        `第五十七条` occurs in ~40 laws; without the title a recitation question cannot tell them
        apart (FINDINGS: 0.33 -> 0.84 recall@5). The stored `text` stays exact for citations.
        A contract's chunk also carries its file name (how people name a contract whose title is
        "NON-DISCLOSURE AGREEMENT", like seven others) and its clause path ("5.2(b)"), which its own
        text shows only as "(b)".
        """
        parts = [self.title, *self.heading_path]
        if self.doc_type == "contract":
            parts = [self.title, PurePath(self.source_path).name, *self.heading_path, *self.articles]
        header = " ".join(parts).strip()
        return f"{header}\n{self.text}" if header else self.text

    def article_texts(self) -> list[str]:
        """What the rescore embedder reads of the chunk article by article (RAG_RESCORE_UNIT=article): each
        article that opens a line, with the title and heading path in front as indexed_text() has them (text
        before the first article is a piece of its own). A chunk of one article, or none, is its
        indexed_text(): the vector ingest already made for it is the same one."""
        starts = []
        at = 0
        for line in self.text.splitlines(keepends=True):
            if _ARTICLE_LINE.match(line):
                starts.append(at)
            at += len(line)
        if starts and starts[0] != 0:
            starts.insert(0, 0)
        if len(starts) <= 1 or self.doc_type == "contract":
            return [self.indexed_text()]
        header = " ".join([self.title, *self.heading_path]).strip()
        pieces = [self.text[a:b].strip() for a, b in zip(starts, [*starts[1:], len(self.text)])]
        return [f"{header}\n{p}" if header else p for p in pieces if p]

    def dense_texts(self, unit: str = "chunk") -> list[str]:
        """What the rescore embedder reads of the chunk: its indexed text, or (unit `article`,
        RAG_RESCORE_UNIT) each of its articles, the chunk read as the best of them."""
        return self.article_texts() if unit == "article" else [self.indexed_text()]

    def payload(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk_id,
            "doc_id": self.doc_id,
            "source_path": self.source_path,
            "title": self.title,
            "text": self.text,
            "char_start": self.char_start,
            "char_end": self.char_end,
            "token_count": self.token_count,
            "chunker": self.chunker,
            "chunker_version": self.chunker_version,
            "heading_path": list(self.heading_path),
            "articles": list(self.articles),
            "article_nums": list(self.article_nums),
            "page": self.page,
            "kind": self.kind,
            "refs": list(self.refs),
            "doc_type": self.doc_type,
        }

    @classmethod
    def from_payload(cls, p: dict[str, Any]) -> "Chunk":
        return cls(
            doc_id=p["doc_id"], source_path=p["source_path"], title=p["title"], text=p["text"],
            char_start=p["char_start"], char_end=p["char_end"], token_count=p["token_count"],
            chunker=p["chunker"], chunker_version=p["chunker_version"],
            heading_path=tuple(p.get("heading_path", ())), articles=tuple(p.get("articles", ())),
            article_nums=tuple(p.get("article_nums", ())), page=p.get("page"),
            kind=p.get("kind", "text"), chunk_id=p.get("chunk_id", ""), refs=tuple(p.get("refs", ())),
            doc_type=p.get("doc_type") or "other",
        )


@dataclass(frozen=True)
class ScoredChunk:
    chunk: Chunk
    score: float
    retrieval_rank: int
    rerank_score: float | None = None
    linked_from: str | None = None  # chunk id whose cross-reference brought this one in


@dataclass(frozen=True)
class Citation:
    """Where an answer's passage lies: the document (its own title, its file), the article or numbered
    section, and `char_start`/`char_end`, code points into the document's parsed text (for .txt and
    Markdown, the file itself) of the text shown (extractive) or sent to the model (llm)."""

    law: str  # the document's title (kept under its first name: every document here began as a law)
    articles: tuple[str, ...]
    doc: str
    chunk_id: str
    page: int | None = None
    section: str | None = None  # 第二十条 / `15. Term and Termination` / `10`
    char_start: int | None = None
    char_end: int | None = None
    # where it lies as people read it, made with the citation (rag_app/query/answer.py citation_for), so a
    # front door shows it without the query package: `《公司法》第二十条 p.3` / `NON-DISCLOSURE AGREEMENT §10`
    label: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"law": self.law, "title": self.law, "article": "、".join(self.articles) or None,
                "articles": list(self.articles), "section": self.section, "doc": self.doc,
                "chunk_id": self.chunk_id, "page": self.page, "char_start": self.char_start,
                "char_end": self.char_end, "label": self.label}


@dataclass(frozen=True)
class Resolved:
    """A scope made concrete (rag_app/query/scope.py `resolve`, `named_in`): the document ids it means,
    how people name them, and how it came about."""

    doc_ids: tuple[str, ...]
    labels: tuple[str, ...]
    how: str  # asked | named

    @property
    def where(self) -> dict[str, list[str]]:
        return {"doc_id": list(self.doc_ids)}

    def note(self) -> str:
        shown = ", ".join(self.labels[:5]) + (f" and {len(self.labels) - 5} more" if len(self.labels) > 5 else "")
        return f"scope ({'named in the question' if self.how == 'named' else 'asked'}): {shown}"


@dataclass(frozen=True)
class Answer:
    """What a query returns: the answer, the passages sent to the model (`contexts`, and the citation of
    each whole: `passages`), the whole reranked
    ranking (`ranked`, which `rag eval` scores), the levers that acted, and every stage's priced usage
    (`usage`: the same values the ledger rows were written from)."""

    query_id: str
    question: str
    text: str
    citations: tuple[Citation, ...]
    mode: str  # "llm" | "extractive"
    contexts: tuple[ScoredChunk, ...] = field(default=(), repr=False)
    passages: tuple[Citation, ...] = field(default=(), repr=False)  # each context's whole range, in order
    usage: tuple[StageUsage, ...] = field(default=(), repr=False)
    ranked: tuple[ScoredChunk, ...] = field(default=(), repr=False)
    levers: tuple[str, ...] = ()
    scope: Resolved | None = None  # the documents retrieval searched within, and whether asked or named
    quality: Any = None  # rag_app.quality.signals.Quality: groundedness, claims, refusal, invalid citations, ...

    @property
    def incomplete(self) -> bool:
        """The LLM's reply stream ended without a finish reason: the text may be cut short."""
        generated = [u for u in self.usage if u.stage == "generate"]
        return bool(generated) and generated[-1].status == "incomplete"
