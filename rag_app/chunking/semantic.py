"""Semantic patch for long spans with no legal structure (preambles, recitals, contract prose).

Small pure steps, after haystack's embedding-based splitter: sentences -> vectors -> adjacent
similarity -> breakpoints where it drops below a threshold. A sentence opening with a connective
(综上所述, 因此 …) is never separated from what it refers to.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

CONNECTIVE = re.compile(r"^\s*(综上所述|因此|故此|据此|基于上述)")
_SENTENCE_END = re.compile(r"[。！？；!?;]+[”’」』）)]*|(?<=[a-z0-9\)])\.(?=\s)|\n")

Vectorize = Callable[[Sequence[str]], np.ndarray]


def split_sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Absolute (start, end) of each sentence in text[start:end], whitespace-trimmed, gap-free cover."""
    spans, s = [], start
    for m in _SENTENCE_END.finditer(text, start, end):
        if m.end() > s:
            spans.append((s, m.end()))
            s = m.end()
    if s < end:
        spans.append((s, end))
    out = []
    for a, b in spans:
        seg = text[a:b]
        lead = len(seg) - len(seg.lstrip())
        trail = len(seg) - len(seg.rstrip())
        if b - trail > a + lead:
            out.append((a + lead, b - trail))
    return out


def tfidf_vectorize(sentences: Sequence[str]) -> np.ndarray:
    """Character 1–2-gram TF-IDF: needs no model and no word segmentation (works for Chinese)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(analyzer="char", ngram_range=(1, 2), sublinear_tf=True)
    # Stays sparse: a dense sentences x vocabulary matrix grows quadratically with a long unit.
    return vec.fit_transform(sentences)


def adjacent_similarity(vectors) -> list[float]:
    """Cosine of each sentence vector with the next; dense arrays or scipy sparse rows."""
    if vectors.shape[0] < 2:
        return []
    if hasattr(vectors, "tocsr"):
        from sklearn.preprocessing import normalize

        unit = normalize(vectors.tocsr())
        return [float(x) for x in np.asarray(unit[:-1].multiply(unit[1:]).sum(axis=1)).ravel()]
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    unit = vectors / norms[:, None]
    return [float(x) for x in np.sum(unit[:-1] * unit[1:], axis=1)]


def breakpoints(sentence_texts: Sequence[str], sims: Sequence[float], threshold: float) -> list[int]:
    """Indices i such that a split goes *before* sentence i."""
    return [i + 1 for i, sim in enumerate(sims)
            if sim < threshold and not CONNECTIVE.match(sentence_texts[i + 1])]


def semantic_segments(text: str, sents: list[tuple[int, int]], vectorize: Vectorize,
                      threshold: float) -> list[list[tuple[int, int]]]:
    """Consecutive sentences grouped into topic segments."""
    if len(sents) < 2:
        return [sents] if sents else []
    texts = [text[a:b] for a, b in sents]
    cuts = set(breakpoints(texts, adjacent_similarity(vectorize(texts)), threshold))
    segments: list = []
    cur: list = []
    for i, sent in enumerate(sents):
        if i in cuts and cur:
            segments.append(cur)
            cur = []
        cur.append(sent)
    segments.append(cur)
    return segments
