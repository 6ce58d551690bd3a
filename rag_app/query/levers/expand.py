"""expand: colloquial -> statutory terms mined from the corpus's own definitions (本法所称X，是指Y):
when a question shares enough words with Y, the defined term X is added to the BM25 query."""
from __future__ import annotations

import re
from collections.abc import Sequence

from rag_app.query.levers._contract import Lever, SearchRequest
from rag_app.query.levers._terms import Terms, plain_word
from rag_app.store import Hit, VectorStore
from rag_app.text import sparse

Definitions = list[tuple[str, frozenset[str]]]

_DEFINITION = re.compile(r"(?:本法|本条例|本办法|本规定|本解释|本编|本章|本节)?所称(?:的)?[“\"]?([^，,。；：“”\"]{2,16}?)[”\"]?[，,]?(?:是指|指)([^。；]{4,300})")


def mine_definitions(texts: list[str]) -> Definitions:
    """(defined term, words of its definition) from 本法所称X，是指Y sentences."""
    out: dict[str, set[str]] = {}
    for text in texts:
        for m in _DEFINITION.finditer(text):
            term = m.group(1).strip()
            words = {t for t in sparse.tokenize(m.group(2)) if plain_word(t) and len(t) >= 2}
            if words:
                out.setdefault(term, set()).update(words)
    return [(t, frozenset(w)) for t, w in sorted(out.items())]


def expansion_terms(question_terms: Terms, definitions: Definitions, min_overlap: int, min_share: float,
                    weight: float) -> Terms:
    words = {t for t in question_terms if plain_word(t)}
    add: Terms = {}
    for term, dwords in definitions:
        hit = len(words & dwords)
        if hit >= min_overlap and hit / len(dwords) >= min_share:
            for t in sparse.tokenize(term):
                if t not in question_terms:
                    add[t] = max(add.get(t, 0.0), weight)
    return add


def corpus_definitions(store: VectorStore, collection: str) -> Definitions:
    """Definitions mined from a collection's chunk texts; the store keeps them until it next writes
    the collection (an amended definition is read again, whatever the chunk count)."""
    return store.derived(collection, "definitions",
                         lambda: mine_definitions([p["text"] for p in store.all_payloads(collection)]))


class Expand(Lever, name="expand", stage="terms", order=10):
    def more_terms(self, req: SearchRequest, terms: Terms, feedback: Sequence[Hit]) -> Terms:
        p = req.params
        return expansion_terms(terms, corpus_definitions(req.store, req.info.name), p.expand_min_overlap,
                               p.expand_min_share, p.expand_weight)


LEVER = Expand()
