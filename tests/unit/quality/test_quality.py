"""Quality signals (rag_app/quality/signals.py), calibrated on answers built from real passages: quoted,
paraphrased, invented (the audit's "第九百九十九条 ... [7]")."""
from __future__ import annotations

import time

import pytest

from rag_app.quality.signals import groundedness, invalid_citations, retrieval_confidence, score_answer
from tests.conftest import LAWS

LAW = (LAWS / "民法商法/公司法(2018-10-26).md").read_text(encoding="utf-8")
P1 = LAW[LAW.index("第五十七条"):LAW.index("第五十八条")]  # the article, both paragraphs
P2 = LAW[LAW.index("第三十七条"):LAW.index("第三十八条")]
PASSAGES = [P1, P2]
INVENTED = "根据《中华人民共和国劳动法》第九百九十九条，用人单位可以随时无理由辞退劳动者且无需支付任何补偿[7]。"


def test_a_sentence_quoted_from_the_passage_it_cites_is_grounded():
    quote = P1.split("\n", 1)[-1].strip().split("。")[0] + "。[1]"
    assert groundedness(quote, PASSAGES) == 1.0


def test_an_invented_claim_citing_a_passage_never_sent_is_not():
    assert groundedness(INVENTED, PASSAGES) == 0.0
    assert groundedness(INVENTED.replace("[7]", ""), PASSAGES) <= 0.3  # citing nothing: checked against all


def test_a_paraphrase_keeping_the_passages_terms_is_supported_and_a_mix_is_partly():
    para = "一人有限责任公司指的是只有一个自然人股东或者一个法人股东的有限责任公司[1]。"
    assert groundedness(para, PASSAGES) == 1.0
    assert groundedness(para + INVENTED, PASSAGES) == 0.5


def test_invalid_citations_name_the_passage_the_law_and_the_article():
    bad = invalid_citations(INVENTED, PASSAGES)
    assert [b["citation"] for b in bad] == ["[7]", "《中华人民共和国劳动法》", "article 999"]
    good = invalid_citations("依据《中华人民共和国公司法》第五十七条[1]，一人有限责任公司适用本节规定。", PASSAGES,
                             titles=["中华人民共和国公司法"])
    assert good == []
    assert invalid_citations("依据《公司法》第57条[2]。", PASSAGES, titles=["中华人民共和国公司法"]) == []  # short name, digits


def test_retrieval_confidence_says_whether_a_named_article_was_retrieved():
    assert retrieval_confidence("公司法第五十七条是什么？", PASSAGES, [0.9, 0.3]) > \
        retrieval_confidence("公司法第九百九十九条是什么？", PASSAGES, [0.9, 0.3])
    assert retrieval_confidence("任何问题", [], []) == 0.0


def test_an_extractive_answer_is_grounded_by_construction():
    q = score_answer("一人有限责任公司是什么？", P1, "extractive", PASSAGES, [1.0, 0.5])
    assert q.groundedness == 1.0 and q.as_json()["invalid_citations"] == []


def test_scoring_an_answer_takes_about_a_millisecond():
    """CPU time, not wall-clock: 200 answers of five sentences against 8 passages."""
    passages = [P1, P2] * 4
    answer = ("一人有限责任公司指的是只有一个自然人股东的有限责任公司[1]。" * 4) + INVENTED
    t0 = time.process_time()
    for _ in range(200):
        score_answer("公司法第五十七条是什么？", answer, "llm", passages, [0.9] * 8)
    per = (time.process_time() - t0) / 200
    assert per < 0.02, per  # a generous bound on a shared 2-core machine (bench/quality_signals.py measures)
