"""Charge-aware lookup (rag_app/query/charges.py): which paragraph defines a named charge."""
from __future__ import annotations

from rag_app.query.charges import charge_chunk_ids, criminal_law_paragraphs, named_charges, score

# Real 刑法 wording (abridged), one paragraph per chunk so the chosen chunk names the paragraph.
CRIMINAL_LAW = {
    "a17": "第十七条 已满十四周岁不满十六周岁的人，犯故意杀人、故意伤害致人重伤或者死亡、强奸、抢劫罪的，应当负刑事责任。",
    "a127": "第一百二十七条 盗窃、抢夺枪支、弹药、爆炸物的，处三年以上十年以下有期徒刑。",
    "a227": "第二百二十七条 伪造或者倒卖伪造的车票、船票、邮票或者其他有价票证，数额较大的，处二年以下有期徒刑。",
    "a234": "第二百三十四条 故意伤害他人身体的，处三年以下有期徒刑、拘役或者管制。",
    "a264": "第二百六十四条 盗窃公私财物，数额较大的，或者多次盗窃的，处三年以下有期徒刑。",
    "a385": "第三百八十五条 国家工作人员利用职务上的便利，索取他人财物的，或者非法收受他人财物，为他人谋取利益的，是受贿罪。",
    "a386": "第三百八十六条 对犯受贿罪的，根据受贿所得数额及情节，依照本法第三百八十三条的规定处罚。",
}
PAYLOADS = [{"chunk_id": cid, "title": "中华人民共和国刑法", "text": text} for cid, text in CRIMINAL_LAW.items()]
OTHER_LAW = {"chunk_id": "civil", "title": "中华人民共和国民法典", "text": "第一千一百六十五条 故意伤害他人身体的，应当承担侵权责任。"}


def test_named_charges_are_read_from_the_charge_field_only():
    q = "事实:被告人张某因琐事与被害人发生争执……其行为已构成××。 罪名:故意伤害;开设赌场罪；故意伤害。"
    assert named_charges(q) == ["故意伤害", "开设赌场"]
    assert named_charges("被告人盗窃他人财物，构成盗窃罪吗？") == []  # no 罪名 field: nothing to look up
    assert named_charges("罪名：走私、贩卖、运输、制造毒品") == ["走私、贩卖、运输、制造毒品"]  # 、 stays inside a charge


def test_a_hostile_charge_field_causes_bounded_work():
    many = "罪名:" + ";".join(f"罪{i:05d}" for i in range(50_000))
    assert len(named_charges(many)) == 8
    assert named_charges("罪名:" + "盗" * 100_000) == []  # no charge name is that long
    assert charge_chunk_ids(many, criminal_law_paragraphs(PAYLOADS)) == []


def test_the_defining_paragraph_wins_over_one_that_mentions_the_charge():
    paras = {p.chunk_id: p for p in criminal_law_paragraphs(PAYLOADS + [OTHER_LAW])}
    assert "civil" not in paras  # only criminal law is searched
    assert score("故意伤害", paras["a234"]) > score("故意伤害", paras["a17"])  # at the opening vs in a list
    assert score("盗窃", paras["a264"]) > score("盗窃", paras["a127"])  # fills more of its opening clause
    assert score("受贿", paras["a385"]) > score("受贿", paras["a386"])  # 是受贿罪: the definition
    assert 0.6 <= score("伪造、倒卖伪造的有价票证", paras["a227"]) < 1  # paraphrased: bigram share


def test_one_chunk_per_charge_in_the_order_named_and_none_below_the_bar():
    paras = criminal_law_paragraphs(PAYLOADS)
    q = "事实:…… 罪名:受贿;盗窃;故意伤害;妨害作证。"
    assert charge_chunk_ids(q, paras) == ["a385", "a264", "a234"]  # 妨害作证 matches nothing well enough
    assert charge_chunk_ids("罪名:盗窃;盗窃罪", paras) == ["a264"]
    assert charge_chunk_ids("罪名:盗窃", []) == []
    from rag_app.query.charges import build_charge_index  # the index: the same choice, 是受贿罪 found past the opening

    assert charge_chunk_ids(q, build_charge_index([*PAYLOADS, OTHER_LAW])) == ["a385", "a264", "a234"]


def test_the_index_picks_what_scoring_every_paragraph_picks_on_the_real_criminal_law():
    """The charge index scores only the paragraphs that can reach MIN_SCORE; on 刑法 and every dev question
    that names charges it must choose exactly what scoring all ~1,500 paragraphs chooses."""
    import json
    from dataclasses import asdict

    from rag_app.query.charges import build_charge_index
    from rag_app.chunking.legal import LegalChunker
    from rag_app.ingest.loaders import load_document
    from tests.conftest import SHARED

    law = next((SHARED / "data" / "legal_zh" / "corpus" / "刑法").iterdir())
    payloads = [{**asdict(c), "title": "中华人民共和国刑法"} for c in LegalChunker().chunk(load_document(law))]
    index = build_charge_index(payloads)
    qa = SHARED / "data" / "legal_zh" / "qa_dev.jsonl"
    questions = [q for q in (json.loads(line)["question"] for line in qa.read_text(encoding="utf-8").splitlines())
                 if named_charges(q)]
    assert len(questions) > 50 and len(index.paragraphs) > 1000
    chosen = [charge_chunk_ids(q, index) for q in questions]
    assert chosen == [charge_chunk_ids(q, index.paragraphs) for q in questions]
    assert sum(map(len, chosen)) > len(questions) // 2  # it does find charges
