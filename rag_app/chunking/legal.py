"""The default chunker: legal rules first, a semantic patch where rules find nothing, then merge."""
from __future__ import annotations

import bisect
import hashlib
import uuid
from collections.abc import Callable
from functools import lru_cache

from rag_app.chunking.merge import Budget, Piece, pack
from rag_app.chunking.semantic import CONNECTIVE, Vectorize, semantic_segments, split_sentences, tfidf_vectorize
from rag_app.chunking.structure import Unit, split_units
from rag_app.text import same_document_refs
from rag_app.text import parse_article_label
from rag_app.text import count_tokens, encoding
from rag_app.core import Chunk, ParsedDocument

TABLE_PREFIX = "【表格】\n"


def chunk_id_for(chunker: str, version: str, content_hash: str, start: int, end: int) -> str:
    digest = hashlib.sha256(f"{chunker}|{version}|{content_hash}|{start}|{end}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16]))


class LegalChunker:
    name = "legal"
    version = "2"  # 2: chunks carry same-law cross-references (refs)

    def __init__(self, budget: Budget = Budget(), semantic_threshold: float = 0.45,
                 vectorize: Vectorize = tfidf_vectorize):
        self.budget = budget
        self.threshold = semantic_threshold
        self.vectorize = vectorize

    def chunk(self, doc: ParsedDocument) -> list[Chunk]:
        text = doc.text
        span_tokens = _span_counter(text)
        units = split_units(doc)
        pieces: list[Piece] = []
        for i, unit in enumerate(units):
            for start, end in self._unit_pieces(unit, text, span_tokens):
                pieces.append(Piece(start, end, unit.boundary, i, standalone=unit.kind == "table",
                                    glue_prev=bool(CONNECTIVE.match(text[start:end]))))
        return [self._to_chunk(doc, group, units, span_tokens) for group in pack(pieces, span_tokens, self.budget)]

    # -- splitting one unit that alone exceeds the hard max -------------------------------------
    def _unit_pieces(self, unit: Unit, text: str, span_tokens) -> list[tuple[int, int]]:
        hard = self.budget.hard_max
        if unit.kind == "table" or span_tokens(unit.start, unit.end) <= hard:
            return [(unit.start, unit.end)]
        # 1. item lines ((一), 1.) are the article's own joints
        segments: list = []
        cur: list = []
        for line in unit.lines:
            if line.kind == "item" and cur:
                segments.append(cur)
                cur = []
            cur.append(line)
        segments.append(cur)
        out = []
        for lines in segments:
            s, e = lines[0].start, lines[-1].end
            if span_tokens(s, e) <= hard:
                out.append((s, e))
                continue
            # 2. semantic breakpoints between sentences, then 3. sentence packing, 4. hard cut.
            # Sentences come from the unit's own lines, so skipped lines (comments) never start or end a piece.
            sentences = [sent for line in lines for sent in split_sentences(text, line.start, line.end)]
            for seg in semantic_segments(text, sentences, self.vectorize, self.threshold):
                out.extend(self._pack_sentences(text, seg, span_tokens))
        return out

    def _pack_sentences(self, text, sentences, span_tokens) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        cur_start: int | None = None
        cur_end = 0
        for a, b in sentences:
            for a, b in _hard_cut(text, a, b, self.budget.hard_max, span_tokens):
                if cur_start is None:
                    cur_start, cur_end = a, b
                elif span_tokens(cur_start, b) <= self.budget.target_max or (
                        CONNECTIVE.match(text[a:b]) and span_tokens(cur_start, b) <= self.budget.hard_max):
                    cur_end = b
                else:
                    out.append((cur_start, cur_end))
                    cur_start, cur_end = a, b
        if cur_start is not None:
            out.append((cur_start, cur_end))
        return out

    def _to_chunk(self, doc, group: list[Piece], units: list[Unit], span_tokens) -> Chunk:
        start, end = group[0].start, group[-1].end
        first = units[group[0].unit_index]
        is_table = first.kind == "table"
        body = doc.text[start:end]
        text = TABLE_PREFIX + body if is_table else body
        articles, keys = [], []
        for idx in dict.fromkeys(p.unit_index for p in group):
            u = units[idx]
            if u.article and u.article not in articles:
                articles.append(u.article)
                keys.append(u.article_key or parse_article_label(u.article) or "")
        return Chunk(
            doc_id=doc.doc_id, source_path=doc.source_path, title=doc.title, text=text,
            char_start=start, char_end=end, token_count=count_tokens(text),
            chunker=self.name, chunker_version=self.version, heading_path=first.heading_path,
            articles=tuple(articles), article_nums=tuple(keys), page=first.page,
            kind="table" if is_table else "text",
            chunk_id=chunk_id_for(self.name, self.version, doc.content_hash, start, end),
            refs=tuple(same_document_refs(body, tuple(keys))),
        )


def _span_counter(text: str) -> Callable[[int, int], int]:
    @lru_cache(maxsize=65536)
    def span_tokens(start: int, end: int) -> int:
        return len(encoding().encode(text[start:end], disallowed_special=()))
    return span_tokens


def _hard_cut(text: str, start: int, end: int, hard_max: int, span_tokens) -> list[tuple[int, int]]:
    """Last resort for one sentence longer than the hard max: cut at a comma, else at a token edge.

    The sentence is tokenized once and cut by token index, so the work is linear in its length;
    re-counting every candidate prefix was quadratic (a 160k-char unpunctuated line took 19 s).
    """
    if span_tokens(start, end) <= hard_max:
        return [(start, end)]
    _, offsets = encoding().decode_with_offsets(encoding().encode(text[start:end], disallowed_special=()))
    edges = [start + o for o in offsets] + [end]  # char position where token i starts
    out, i = [], 0  # i: index of the token the current piece starts at
    while len(edges) - 1 - i > hard_max:
        piece_start = edges[i]
        j = i + hard_max
        while edges[j] <= piece_start:  # several tokens of one character share an edge
            j += 1
        cut = edges[j]
        for k in range(cut, max(piece_start, cut - 200), -1):
            if text[k - 1] in "，,、：:":
                cut = k
                break
        # A substring can tokenize into a few more tokens than its slice of the whole; shrink until it fits.
        while span_tokens(piece_start, cut) > hard_max and cut - piece_start > 1:
            cut = piece_start + (cut - piece_start) * 9 // 10
        out.append((piece_start, cut))
        i = bisect.bisect_left(edges, cut)
        if edges[i] != cut:  # the cut fell inside a token: count that token with the next piece
            i -= 1
            edges[i] = cut
    out.append((edges[i], end))
    return out


__all__ = ["LegalChunker", "TABLE_PREFIX", "chunk_id_for", "split_sentences"]
