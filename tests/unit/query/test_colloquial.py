"""The colloquial table (rag_app/data/colloquial_zh.tsv) and the terms it adds to a BM25 query."""
from __future__ import annotations

from rag_app.query import colloquial

from rag_app.text import sparse


def test_the_table_loads_and_every_row_maps_a_word_to_statutory_words():
    rows = colloquial.table()
    assert len(rows) >= 100 and len({word for word, _ in rows}) == len(rows)  # no word listed twice
    assert all(word and statutory for word, statutory in rows)
    assert dict(rows)["房东"] == ("出租人",)


def test_everyday_words_add_the_statutes_words_at_the_given_weight_and_nothing_twice():
    q = "租房期间家具坏了，可以找房东修吗？"
    query = {t: 1.0 for t in sparse.tokenize(q)}
    add = colloquial.expansion_terms(q, query, 0.5)
    assert {"出租人", "承租人", "租赁"} <= set(add) and set(add.values()) == {0.5}
    assert not set(add) & set(query)  # what the user wrote keeps its own weight
    assert colloquial.expansion_terms("出租人应当履行维修义务吗？", {}, 0.5) == {}
