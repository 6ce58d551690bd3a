"""Levers that read the question, through the real store: `charge` (a case description that names
its charge gets the article defining that charge first, even when the facts' words point elsewhere)
and `colloquial` (everyday words reach the statute's wording)."""
from __future__ import annotations

import pytest

from rag_app.query.levers import search
from tests.conftest import ingested_app

# One article per chapter, so each is its own chunk (the legal chunker never merges across 章).
CRIMINAL_LAW = """# 中华人民共和国刑法
<!-- INFO END -->
## 第一章 刑事责任
第十七条 已满十四周岁不满十六周岁的人，犯故意杀人、故意伤害致人重伤或者死亡、强奸、抢劫罪的，应当负刑事责任。
## 第二章 医疗
第三百三十六条 未取得医生执业资格的人非法行医，情节严重的，处三年以下有期徒刑。医院诊断、鉴定、住院治疗的费用由其承担。
## 第三章 侵犯公民人身权利罪
第二百三十四条 故意伤害他人身体的，处三年以下有期徒刑、拘役或者管制。
## 第四章 侵犯财产罪
第二百六十四条 盗窃公私财物，数额较大的，处三年以下有期徒刑。
"""
CIVIL_LAW = """# 中华人民共和国民法典
<!-- INFO END -->
## 第一章 侵权责任
第一千一百六十五条 行为人因过错侵害他人民事权益造成损害的，应当承担侵权责任。
## 第二章 租赁合同
第七百一十二条 出租人应当履行租赁物的维修义务，但是当事人另有约定的除外。
## 第三章 物业服务合同
第九百四十二条 物业服务人应当按照约定和物业的使用性质，妥善维修、养护、清洁、绿化和经营管理物业服务区域内的业主共有部分。
"""
FACTS = ("事实:公诉机关指控，被告人张某与被害人在医院门口发生争执，张某将被害人打伤，被害人住院治疗，"
         "经鉴定为轻伤，医院诊断、鉴定、住院治疗费用共计一万元。")


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    with ingested_app(tmp_path_factory.mktemp("charge"), {"刑法.md": CRIMINAL_LAW, "民法典.md": CIVIL_LAW},
                      retriever="bm25", retrieval_levers="none") as a:
        yield a


def first_article(hits) -> str:
    return hits[0].chunk.text.split()[0]


def test_the_named_charge_puts_its_defining_article_first(app):
    q = FACTS + " 罪名:故意伤害。"
    plain = search(app.store, app.collection, q, None, mode="bm25", levers=(), top_k=4)
    assert first_article(plain) != "第二百三十四条"  # the facts' words pull the 医院/鉴定 article up
    charged = search(app.store, app.collection, q, None, mode="bm25", levers=("charge",), top_k=4)
    assert first_article(charged) == "第二百三十四条"
    assert len({h.chunk.chunk_id for h in charged}) == len(charged)  # moved to the front, not duplicated


def test_two_charges_two_articles_in_order_and_no_charge_changes_nothing(app):
    q = FACTS + " 罪名:盗窃;故意伤害。"
    hits = search(app.store, app.collection, q, None, mode="bm25", levers=("charge",), top_k=4)
    assert [h.chunk.text.split()[0] for h in hits[:2]] == ["第二百六十四条", "第二百三十四条"]
    plain = search(app.store, app.collection, FACTS, None, mode="bm25", levers=(), top_k=4)
    same = search(app.store, app.collection, FACTS, None, mode="bm25", levers=("charge",), top_k=4)
    assert [h.chunk.chunk_id for h in same] == [h.chunk.chunk_id for h in plain]


def test_auto_includes_the_lever_and_the_retrieve_row_names_it_only_when_it_acted(app):
    import sqlite3

    from rag_app.query.levers import levers_for

    assert "charge" in levers_for("auto", app.collection)
    app.settings.retrieval_levers = "charge"
    try:
        charged = app.ask(FACTS + " 罪名:故意伤害。")
        app.ask(FACTS)
    finally:
        app.settings.retrieval_levers = "none"
    assert charged.contexts[0].chunk.text.startswith("第二百三十四条")
    app.writer.flush()
    models = [r[0] for r in sqlite3.connect(app.settings.ledger_path).execute(
        "SELECT model FROM stage_calls WHERE stage = 'retrieve' ORDER BY rowid DESC LIMIT 2")]
    assert models == ["qdrant:bm25", "qdrant:bm25+charge"]


def test_everyday_words_reach_the_article_in_the_statutes_words(app):
    q = "家里东西坏了，房东不给修怎么办？"
    plain = search(app.store, app.collection, q, None, mode="bm25", levers=(), top_k=4)
    assert "第七百一十二条" not in [h.chunk.text.split()[0] for h in plain]  # no word of it in the question
    hits = search(app.store, app.collection, q, None, mode="bm25", levers=("colloquial",), top_k=4)
    assert first_article(hits) == "第七百一十二条"  # 房东 -> 出租人


def test_the_retrieve_row_names_colloquial_only_when_a_table_word_added_something(app):
    import sqlite3

    from chains.rag import build_rag

    chain = build_rag(app.pipeline(app.query_config().with_(retrieval_levers="colloquial")))
    for i, q in enumerate(("家里东西坏了，房东不给修怎么办？",  # 房东 -> 出租人
                           "出租人应当履行维修义务吗？")):  # statutory already: nothing to add
        answer = chain.invoke({"question": q}, {"callbacks": [app.tracer], "metadata": {"query_id": f"colloquial-{i}"}})
        assert answer.levers == (("colloquial",) if i == 0 else ())
    app.writer.flush()
    models = [r[0] for r in sqlite3.connect(app.settings.ledger_path).execute(
        "SELECT model FROM stage_calls WHERE stage = 'retrieve' ORDER BY rowid DESC LIMIT 2")]
    assert models == ["qdrant:bm25", "qdrant:bm25+colloquial"]
