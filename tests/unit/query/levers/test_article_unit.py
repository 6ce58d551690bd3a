"""Article-level rescore (RAG_RESCORE_UNIT=article): a chunk of several articles is read article by
article, each with the chunk's title and headings, and scored by its best article; a chunk of one article
is read exactly as before, so its vector is the one ingest already made."""
from __future__ import annotations

import numpy as np
import pytest

from rag_app.core.types import Chunk
from rag_app.core.usage import EmbedUsage
from rag_app.query.knobs import QueryKnobs
from rag_app.query.levers import dense_order
from rag_app.query.levers.rescore import Rescore, dense_texts

THREE = ("第一条 为了规范公司的组织和行为，制定本法。\n第二条 本法所称公司是指有限责任公司和股份有限公司。\n"
         "第三条 有限责任公司的股东以其认缴的出资额为限对公司承担责任。\n股份有限公司的股东以其认购的股份为限。")


def chunk(text, doc_type="statute", cid="c"):
    return Chunk("d", "law.md", "中华人民共和国公司法", text, 0, len(text), 50, "legal", "1", heading_path=("第一章 总则",),
                 chunk_id=cid, doc_type=doc_type)


def test_a_chunk_of_several_articles_is_read_article_by_article_with_its_headings():
    pieces = chunk(THREE).article_texts()
    assert pieces == ["中华人民共和国公司法 第一章 总则\n第一条 为了规范公司的组织和行为，制定本法。",
                      "中华人民共和国公司法 第一章 总则\n第二条 本法所称公司是指有限责任公司和股份有限公司。",
                      "中华人民共和国公司法 第一章 总则\n第三条 有限责任公司的股东以其认缴的出资额为限对公司承担责任。\n"
                      "股份有限公司的股东以其认购的股份为限。"]  # a second paragraph stays with its article


def test_text_before_the_first_article_is_a_piece_of_its_own():
    pieces = chunk("本章规定公司的设立。\n" + THREE).article_texts()
    assert len(pieces) == 4 and pieces[0].endswith("\n本章规定公司的设立。")


@pytest.mark.parametrize("text,doc_type", [("第五十七条 一人有限责任公司的设立和组织机构，适用本节规定。", "statute"),
                                           ("没有条文编号的一段话。", "statute"),
                                           ("1.1 第一条 the parties agree.\n第二条 x", "contract")])
def test_one_article_none_or_a_contract_is_read_as_before(text, doc_type):
    c = chunk(text, doc_type)
    assert c.article_texts() == [c.indexed_text()]


class Lookup:
    """Passage vectors from a table; the question's vector given."""

    model_name = "e5-onnx"

    def __init__(self, table):
        self.table = table

    def cached_with_stats(self, texts):
        found = {t: self.table[t] for t in texts if t in self.table}
        return found, EmbedUsage(texts=len(texts), cache_hits=len(found), cache_misses=len(texts) - len(found),
                                 not_embedded=len(texts) - len(found))

    def embed_array_with_stats(self, texts):
        return np.stack([self.table[t] for t in texts]), EmbedUsage(texts=len(texts))


def test_a_chunk_is_as_close_as_its_closest_article():
    q = np.array([1.0, 0.0], np.float32)
    several, single = chunk(THREE, cid="several"), chunk("第九条 其他。", cid="single")
    table = {several.indexed_text(): np.array([0.2, 0.98], np.float32),  # its blend is far from the question
             single.indexed_text(): np.array([0.6, 0.8], np.float32)}
    p = several.article_texts()
    table.update({p[0]: np.array([0.0, 1.0], np.float32), p[1]: np.array([0.9, 0.44], np.float32),
                  p[2]: np.array([0.1, 0.99], np.float32)})
    payloads = {"several": several.payload(), "single": single.payload()}
    emb = Lookup(table)
    by_chunk, _ = dense_order("q", payloads, ["several", "single"], emb, q, embed_missing=False)
    by_article, _ = dense_order("q", payloads, ["several", "single"], emb, q, embed_missing=False, unit="article")
    assert [c for c, _ in by_chunk] == ["single", "several"]
    assert by_article == [("several", pytest.approx(0.9)), ("single", pytest.approx(0.6))]
    del table[p[2]]  # an article without a vector yet: its chunk is left out, counted once
    left, used = dense_order("q", payloads, ["several", "single"], emb, q, embed_missing=False, unit="article")
    assert [c for c, _ in left] == ["single"] and used.not_embedded == 1
    assert dense_texts(payloads["several"], "article") == p and dense_texts(payloads["several"]) == [several.indexed_text()]


def test_the_retrieve_row_names_the_unit_and_a_bad_unit_is_refused():
    assert Rescore().label(QueryKnobs(rescore_unit="article", query_adapter="none")) == "rescore(e5-onnx/article)"
    assert Rescore().label(QueryKnobs(query_adapter="none")) == "rescore(e5-onnx/article)"  # the default
    assert Rescore().label(QueryKnobs(rescore_unit="chunk", query_adapter="none")) == "rescore(e5-onnx)"
    with pytest.raises(ValueError, match=r"rescore_unit\n.*'chunk' or 'article'"):
        QueryKnobs(rescore_unit="sentence")
