"""Pairs mined from a statute's own text (rag_app/evaluation/mined_pairs.py): definitions, cross-references
and small headings become questions whose gold spans an article exactly as qa_dev's gold spans do (its label
to the end of its last paragraph)."""
from __future__ import annotations

from rag_app.evaluation.mined_pairs import articles_of, mine, pairs_of

LAW = """# 中华人民共和国示例法

<!-- INFO END -->

## 第一章  总则

第一条 为了规范示例行为，制定本法。

第二条 本法所称经营者，是指从事商品经营的自然人、法人。

## 第二章  押金

### 第一节  押金的返还

第三条 租赁期限届满，出租人应当返还押金。

出租人无正当理由不返还的，承租人可以依照本法第五条的规定请求赔偿。

### 第二节  违约责任

第四条 当事人一方不履行合同义务的，应当承担违约责任。

第五条 出租人违反本法第三条规定的，应当赔偿损失。
"""


def test_articles_span_from_their_label_to_their_last_paragraph_with_their_headings():
    arts = articles_of(LAW)
    assert [a.key for a in arts] == [(1, 0), (2, 0), (3, 0), (4, 0), (5, 0)]
    third = arts[2]
    assert LAW[third.start:third.end].startswith("第三条") and LAW[third.start:third.end].endswith("请求赔偿。")
    assert third.headings == ("第二章  押金", "第一节  押金的返还")
    assert LAW[arts[1].start:arts[1].end].endswith("法人。")  # stops before the next heading


def test_definitions_cross_references_and_small_headings_become_questions():
    pairs = pairs_of("示例法.md", LAW)
    by_kind = {}
    for q in pairs:
        by_kind.setdefault(q.task, []).append(q)
    (d,) = by_kind["mined_definition"]
    assert d.question == "什么是经营者？" and LAW[d.gold[0].char_start:].startswith("第二条")
    refs = {(q.question, LAW[q.gold[0].char_start:q.gold[0].char_start + 3]) for q in by_kind["mined_crossref"]}
    assert ("出租人无正当理由不返还的，承租人可以请求赔偿。", "第五条") in refs
    assert ("出租人的，应当赔偿损失。", "第三条") in refs  # `违反本法第三条规定` taken out
    heads = {q.question: [LAW[g.char_start:g.char_start + 3] for g in q.gold] for q in by_kind["mined_heading"]}
    assert heads == {"押金的返还有哪些规定？": ["第三条"], "违约责任有哪些规定？": ["第四条", "第五条"]}
    assert "总则有哪些规定？" not in heads  # a heading that names no subject
    assert all(q.doc is None and q.id.startswith("mined-") for q in pairs)


def test_mine_is_a_seeded_sample_of_the_kinds_asked_for():
    docs = [("示例法.md", LAW)]
    assert [q.id for q in mine(docs, 3, seed=1)] == [q.id for q in mine(docs, 3, seed=1)]
    assert len(mine(docs, 100)) == len(pairs_of("示例法.md", LAW))
    assert {q.task for q in mine(docs, 100, kinds=("definition",))} == {"mined_definition"}
