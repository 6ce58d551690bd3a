"""Semantic breakpoints and merge rules on small hand-made inputs where the answer is known."""
from __future__ import annotations

import numpy as np

from rag_app.chunking.legal import LegalChunker
from rag_app.chunking.merge import Budget, Piece, pack
from rag_app.chunking.semantic import (adjacent_similarity, breakpoints, semantic_segments, split_sentences,
                                       tfidf_vectorize)
from rag_app.ingest.loaders import text_blocks
from rag_app.core.types import ParsedDocument


def doc_of(text: str) -> ParsedDocument:
    return ParsedDocument("/tmp/x.md", "d1", "h1", "测试法", text, tuple(text_blocks(text)), "markdown")


def test_split_sentences_covers_text_with_exact_offsets():
    text = "第一句话。第二句话！第三句？最后一句没有标点"
    spans = split_sentences(text, 0, len(text))
    assert [text[a:b] for a, b in spans] == ["第一句话。", "第二句话！", "第三句？", "最后一句没有标点"]


def test_tfidf_breakpoint_at_topic_shift():
    sents = ["劳动合同应当以书面形式订立劳动合同。", "劳动合同期限和劳动合同的工资应当写明。",
             "船舶碰撞造成海上损失的赔偿。", "船舶碰撞的海上损失由船舶所有人承担。"]
    sims = adjacent_similarity(tfidf_vectorize(sents))
    assert sims[1] < sims[0] and sims[1] < sims[2]
    assert breakpoints(sents, sims, threshold=0.3) == [2]


def test_connective_sentence_is_never_split_from_what_it_refers_to():
    sents = ["甲公司拖欠货款。", "综上所述，乙方请求成立。"]
    assert breakpoints(sents, [0.0], threshold=0.45) == []  # similarity 0 would split; the connective forbids it


def test_semantic_segments_with_a_fixed_vectorizer():
    text = "猫。猫。狗。狗。"
    vecs = {"猫。": [1.0, 0.0], "狗。": [0.0, 1.0]}
    segs = semantic_segments(text, split_sentences(text, 0, len(text)),
                             lambda ss: np.array([vecs[s] for s in ss]), 0.45)
    assert [[text[a:b] for a, b in seg] for seg in segs] == [["猫。", "猫。"], ["狗。", "狗。"]]


def count(start, end):
    return end - start  # 1 token per char keeps the arithmetic visible


def test_pack_respects_target_boundary_and_tables():
    b = Budget(target_max=10, hard_max=20, min_tokens=3)
    pieces = [Piece(0, 4, ("章1",), 0), Piece(4, 8, ("章1",), 1), Piece(8, 12, ("章1",), 2),  # 4+4 fit, +4 > 10
              Piece(12, 14, ("章2",), 3),  # new chapter: never merged back
              Piece(14, 30, ("章2",), 4, standalone=True),  # table alone
              Piece(30, 32, ("章2",), 5)]
    groups = pack(pieces, count, b)
    assert [[p.unit_index for p in g] for g in groups] == [[0, 1], [2], [3], [4], [5]]


def test_pack_small_fragment_joins_and_connective_glues():
    b = Budget(target_max=10, hard_max=20, min_tokens=3)
    pieces = [Piece(0, 9, ("c",), 0), Piece(9, 11, ("c",), 1),  # 2-token fragment joins (11 <= hard max)
              Piece(11, 20, ("c",), 2), Piece(20, 29, ("c",), 3, glue_prev=True)]  # connective joins
    assert [[p.unit_index for p in g] for g in pack(pieces, count, b)] == [[0, 1], [2, 3]]


def test_items_split_only_at_line_start_and_headings_recognised():
    body = "（一）第一项内容较长" * 30
    text = ("# 测试法\n\n## 第一章 总则\n\n第一条 本法依照本条（一）项制定。\n\n"
            f"第二条 下列情形：\n\n{body}。\n\n（二）第二项。\n\n## 第二章 附则\n\n第三条 本法自公布之日起施行。\n")
    chunker = LegalChunker(Budget(target_max=40, hard_max=200, min_tokens=5))
    chunks = chunker.chunk(doc_of(text))
    for c in chunks:
        assert text[c.char_start:c.char_end] == c.text
    # 第一条's mid-sentence （一） never started a chunk
    assert not any(c.text.startswith("项制定") for c in chunks)
    art3 = next(c for c in chunks if "第三条" in c.articles)
    assert art3.heading_path == ("第二章 附则",) and art3.articles == ("第三条",)
    # 第二条 is longer than the hard max: split, each piece within it, the item line starts a piece
    art2 = [c for c in chunks if "第二条" in c.articles or c.text.startswith("（")]
    assert len(art2) >= 2 and all(c.token_count <= 200 for c in chunks)
    assert any(c.text.startswith("（二）") or "（二）第二项。" in c.text for c in art2)
