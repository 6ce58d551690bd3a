"""The chunkers users would otherwise pick, in the same harness, each tracking exact offsets.

fixed-512 / fixed-256  cl100k token windows (offsets from tiktoken's decode_with_offsets)
recursive              LangChain RecursiveCharacterTextSplitter, Chinese separators, ~500 chars, 50 overlap
sentence-256           sentences packed to 256 tokens with 20% overlap
semantic-window        the source article's sliding window: paragraph embeddings, grow while the
                       cosine to the running-mean anchor stays >= 0.85, 2-8 paragraphs
"""
from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

import numpy as np

from rag_app.chunking.legal import chunk_id_for
from rag_app.chunking.semantic import split_sentences
from rag_app.text import count_tokens, encoding
from rag_app.core import Chunk, ParsedDocument


class _Base:
    name = "base"
    version = "1"

    def chunk(self, doc: ParsedDocument) -> list[Chunk]:
        out, block_ends = [], [b.end for b in doc.blocks]
        for start, end in self.spans(doc):
            while start < end and doc.text[start].isspace():
                start += 1
            while end > start and doc.text[end - 1].isspace():
                end -= 1
            if end <= start:
                continue
            text = doc.text[start:end]
            out.append(Chunk(doc_id=doc.doc_id, source_path=doc.source_path, title=doc.title, text=text,
                             char_start=start, char_end=end, token_count=count_tokens(text), chunker=self.name,
                             chunker_version=self.version, page=_page_at(doc, block_ends, start),
                             chunk_id=chunk_id_for(self.name, self.version, doc.content_hash, start, end)))
        return out

    def spans(self, doc: ParsedDocument) -> list[tuple[int, int]]:
        raise NotImplementedError


def _page_at(doc: ParsedDocument, block_ends: list[int], pos: int) -> int | None:
    # Blocks are in text order: bisect, since a scan per chunk is quadratic on a million lines.
    i = bisect.bisect_right(block_ends, pos)
    return doc.blocks[i].page if i < len(doc.blocks) else None


class FixedTokenChunker(_Base):
    def __init__(self, size: int, overlap: int = 0):
        self.size, self.overlap = size, overlap
        self.name = f"fixed-{size}"

    def spans(self, doc):
        tokens = encoding().encode(doc.text, disallowed_special=())
        _, offsets = encoding().decode_with_offsets(tokens)
        step = self.size - self.overlap
        out = []
        for i in range(0, len(tokens), step):
            j = min(i + self.size, len(tokens))
            out.append((offsets[i], offsets[j] if j < len(tokens) else len(doc.text)))
            if j == len(tokens):
                break
        return out


class RecursiveChunker(_Base):
    name = "recursive"

    def __init__(self, chunk_size: int = 500, overlap: int = 50):
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        self.splitter = RecursiveCharacterTextSplitter(
            chunk_size=chunk_size, chunk_overlap=overlap, keep_separator="end",
            separators=["\n\n", "\n", "。", "！", "？", "；", "，", " ", ""])

    def spans(self, doc):
        # The splitter reports no offsets. Pieces are verbatim substrings in order, so a forward
        # search from the previous piece's start finds each one where it was cut (FINDINGS warns
        # that a global search would land on repeated phrases).
        out, cursor = [], 0
        for piece in self.splitter.split_text(doc.text):
            pos = doc.text.find(piece, cursor)
            if pos < 0:
                raise ValueError(f"{doc.source_path}: splitter piece not found after offset {cursor}")
            out.append((pos, pos + len(piece)))
            cursor = pos + 1
        return out


class SentencePackChunker(_Base):
    name = "sentence-256"

    def __init__(self, size: int = 256, overlap_ratio: float = 0.2):
        self.size, self.overlap = size, int(size * overlap_ratio)

    def spans(self, doc):
        sents = [s for b in doc.blocks for s in split_sentences(doc.text, b.start, b.end)]
        toks = [count_tokens(doc.text[a:b]) for a, b in sents]
        out, i = [], 0
        while i < len(sents):
            j, total = i, 0
            while j < len(sents) and (total + toks[j] <= self.size or j == i):
                total += toks[j]
                j += 1
            out.append((sents[i][0], sents[j - 1][1]))
            if j >= len(sents):
                break
            back, k = 0, j  # step back over trailing sentences worth ~20% of the window
            while k - 1 > i and back + toks[k - 1] <= self.overlap:
                back += toks[k - 1]
                k -= 1
            i = k
        return out


class SemanticWindowChunker(_Base):
    name = "semantic-window"

    def __init__(self, embed: Callable[[Sequence[str]], np.ndarray], threshold: float = 0.85,
                 min_paragraphs: int = 2, max_paragraphs: int = 8):
        self.embed, self.threshold = embed, threshold
        self.min_p, self.max_p = min_paragraphs, max_paragraphs

    def spans(self, doc):
        paras = [(b.start, b.end) for b in doc.blocks]
        if not paras:
            return []
        vecs = np.asarray(self.embed([doc.text[a:b] for a, b in paras]), dtype=np.float32)
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-9)
        out, i = [], 0
        while i < len(paras):
            anchor, j = vecs[i].copy(), i + 1
            while j < len(paras) and j - i < self.max_p:
                mean = anchor / max(np.linalg.norm(anchor), 1e-9)
                if j - i >= self.min_p and float(mean @ vecs[j]) < self.threshold:
                    break
                anchor += vecs[j]
                j += 1
            out.append((paras[i][0], paras[j - 1][1]))
            i = j
        return out
