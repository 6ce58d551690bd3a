"""Everyday words -> statutory words for the BM25 query (the `colloquial` lever).

Layperson questions say 房东, 辞职, 快递; the articles that answer them say 出租人, 解除劳动合同,
承运人. BM25 cannot bridge that, and the corpus's own definitions (the `expand` lever) rarely
cover everyday speech. The table (rag_app/data/colloquial_zh.tsv) is general legal usage, not
tied to any article; a question containing a left-hand word gets the right-hand words added to
its query at a lower weight, so they can pull the statute's wording into the candidates without
outweighing what the user actually wrote.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources

from rag_app.text import sparse


@lru_cache(maxsize=1)
def table() -> tuple[tuple[str, tuple[str, ...]], ...]:
    rows = []
    text = resources.files("rag_app.data").joinpath("colloquial_zh.tsv").read_text(encoding="utf-8")
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        left, sep, right = line.partition("\t")
        if not sep or not left.strip() or not right.split():
            raise ValueError(f"colloquial_zh.tsv line {n}: expected 'word<TAB>statutory words', got {line!r}")
        rows.append((left.strip(), tuple(right.split())))
    return tuple(rows)


def expansion_terms(question: str, query_terms: dict[str, float], weight: float) -> dict[str, float]:
    """Statutory tokens for the everyday words in `question`, at `weight`, leaving out what the
    query already has."""
    add: dict[str, float] = {}
    for word, statutory in table():
        if word in question:
            for term in statutory:
                for tok in sparse.tokenize(term):
                    if tok not in query_terms:
                        add[tok] = weight
    return add
