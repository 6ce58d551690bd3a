"""Mutation-style checks on the legal chunker, on real law text from the repo's fixture: they fail
when the split at numbered-item lines, or the guard that keeps a fitting article whole, is removed."""
from __future__ import annotations

from pathlib import Path

from rag_app.chunking.legal import LegalChunker
from rag_app.chunking.merge import Budget
from rag_app.ingest.loaders import load_document
from rag_app.text.tokens import count_tokens
from tests.conftest import LAWS

LABOR = LAWS / "社会法/劳动法(2018-12-29).md"
# 劳动法 第二十六条 as published, with its item (一) given two more real sentences of the same law
# (from 第二十六条's neighbours), so one item holds several sentences, and a closing line that cites
# an item mid-sentence (依照本条（一）项), which is no joint.
ARTICLE = """# 测试法

第二十六条 有下列情形之一的，用人单位可以解除劳动合同，但是应当提前三十日以书面形式通知劳动者本人：

（一）劳动者患病或者非因工负伤，医疗期满后，不能从事原工作也不能从事由用人单位另行安排的工作的。用人单位依据本条规定解除劳动合同的，应当依照国家有关规定给予经济补偿。劳动者在医疗期内的，用人单位不得依据本条规定解除劳动合同；

（二）劳动者不能胜任工作，经过培训或者调整工作岗位，仍不能胜任工作的；

（三）劳动合同订立时所依据的客观情况发生重大变化，致使原劳动合同无法履行，经当事人协商不能就变更劳动合同达成协议的。

用人单位依照本条（一）项规定解除劳动合同的，应当依照国家有关规定给予经济补偿。

第二十七条 用人单位濒临破产进行法定整顿期间或者生产经营状况发生严重困难，确需裁减人员的，应当提前三十日向工会或者全体职工说明情况。
"""


def chunk(tmp_path: Path, text: str, budget: Budget):
    path = tmp_path / "law.md"
    path.write_text(text, encoding="utf-8")
    doc = load_document(path)
    return doc, LegalChunker(budget).chunk(doc)


def test_an_oversized_article_splits_at_its_item_lines_and_never_inside_an_item(tmp_path):
    item_one = ARTICLE.split("\n\n")[2]
    article = "\n\n".join(ARTICLE.split("\n\n")[1:5])
    # the article is over the hard max; item (一) alone fits the hard max but not the target
    budget = Budget(target_max=60, hard_max=count_tokens(item_one) + 5, min_tokens=5)
    assert count_tokens(article) > budget.hard_max and count_tokens(item_one) > budget.target_max
    doc, chunks = chunk(tmp_path, ARTICLE, budget)
    text = doc.text
    item_starts = {text.index(m) for m in ("（一）", "（二）", "（三）")}
    art_start = text.index("第二十六条")
    starts = [c.char_start for c in chunks if "第二十六条" in c.articles]
    assert len(starts) >= 2  # it was split
    assert set(starts) <= item_starts | {art_start}  # only at the article's own joints
    one = text.index("（一）")
    assert any(c.char_start == one and c.char_end >= one + len(item_one) for c in chunks)  # item (一) whole


def test_an_article_under_the_hard_max_stays_whole(tmp_path):
    article = "\n\n".join(ARTICLE.split("\n\n")[1:6])
    budget = Budget(target_max=60, hard_max=count_tokens(article) + 10, min_tokens=5)
    doc, chunks = chunk(tmp_path, ARTICLE, budget)
    art = [c for c in chunks if "第二十六条" in c.articles]
    assert len(art) == 1 and doc.text[art[0].char_start:art[0].char_end].startswith("第二十六条")
    assert doc.text.index("用人单位依照本条") < art[0].char_end


def test_a_mid_sentence_item_reference_is_no_joint(tmp_path):
    item_one = ARTICLE.split("\n\n")[2]
    budget = Budget(target_max=60, hard_max=count_tokens(item_one) + 5, min_tokens=5)
    doc, chunks = chunk(tmp_path, ARTICLE, budget)
    closing = doc.text.index("用人单位依照本条（一）项")
    assert all(c.char_start != closing for c in chunks)  # it stays with item (三)
    three = doc.text.index("（三）")
    assert any(c.char_start <= three and c.char_end > closing for c in chunks)
