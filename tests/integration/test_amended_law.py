"""An amended law is answered from its new text at once: the indexes built from a collection's chunks
(the charge lever's criminal-law paragraphs, the mined definitions, the titles) belong to the store and
are dropped by the write that replaces a document, whatever the chunk count."""
from __future__ import annotations

from tests.conftest import ingested_app
from tests.integration.test_question_levers import CIVIL_LAW, CRIMINAL_LAW, FACTS

QUESTION = FACTS + " 罪名:故意伤害。"
AMENDED = CRIMINAL_LAW.replace("故意伤害他人身体的，处三年以下有期徒刑", "故意伤害他人身体的，处五年以下有期徒刑")


def charged_passage(app) -> str:
    answer = app.ask(QUESTION)
    assert answer.levers == ("charge",)
    return answer.contexts[0].chunk.text


def test_reingesting_an_amended_law_is_answered_from_the_new_text(tmp_path):
    assert AMENDED != CRIMINAL_LAW
    with ingested_app(tmp_path, {"刑法.md": CRIMINAL_LAW, "民法典.md": CIVIL_LAW}, retriever="bm25",
                      retrieval_levers="charge") as app:
        before = charged_passage(app)
        assert before.startswith("第二百三十四条") and "三年" in before
        count = app.store.count(app.settings.collection)
        (tmp_path / "corpus" / "刑法.md").write_text(AMENDED, encoding="utf-8")
        report = app.ingest([tmp_path / "corpus"])
        assert [o.status for o in sorted(report.outcomes, key=lambda o: o.path)] == ["written", "unchanged"]
        assert app.store.count(app.settings.collection) == count  # same size: a size-keyed cache would not notice
        after = charged_passage(app)
    assert after.startswith("第二百三十四条") and "五年" in after and "三年" not in after


def test_definitions_and_titles_follow_a_replaced_document(tmp_path):
    from rag_app.query.levers import corpus_definitions

    law = "# 中华人民共和国示例法\n<!-- INFO END -->\n## 第一章 总则\n第二条 本法所称承租人，是指租用他人房屋的人。\n"
    with ingested_app(tmp_path, {"示例法.md": law}, retriever="bm25", retrieval_levers="none") as app:
        name = app.settings.collection
        assert [t for t, _ in corpus_definitions(app.store, name)] == ["承租人"]
        assert app.store.titles(name) == ["中华人民共和国示例法"]
        amended = law.replace("示例法", "示范法").replace("承租人", "出租人").replace("租用他人房屋", "出租房屋")
        (tmp_path / "corpus" / "示例法.md").write_text(amended, encoding="utf-8")
        assert not app.ingest([tmp_path / "corpus"]).errors
        assert [t for t, _ in corpus_definitions(app.store, name)] == ["出租人"]
        assert app.store.titles(name) == ["中华人民共和国示范法"]
