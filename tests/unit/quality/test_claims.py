"""Each claim of an answer checked against the passages (rag_app/quality/claims.py, meaning.py, numbers.py,
lexicon.py): fixed case tables over real articles of 公司法 (tests/fixtures/laws), one row per rule, so
removing a rule turns its rows red."""
from __future__ import annotations

import pytest

from rag_app.quality.lexicon import is_refusal
from rag_app.quality.numbers import numbers
from rag_app.quality.signals import score_answer
from tests.conftest import LAWS

LAW = (LAWS / "民法商法/公司法(2018-10-26).md").read_text(encoding="utf-8")
FEES = (LAWS / "行政法规/仲裁委员会仲裁收费办法(1995-07-28).md").read_text(encoding="utf-8")


def article(first: str, after: str, text: str = LAW) -> str:
    return text[text.index("\n" + first) + 1:text.index("\n" + after)].strip()


A45 = article("第四十五条", "第四十六条")  # 董事任期 ... 每届任期不得超过三年。... 连选可以连任。
A41 = article("第四十一条", "第四十二条")  # 应当于会议召开十五日前通知全体股东
A35 = article("第三十五条", "第三十六条")  # 股东不得抽逃出资
A22 = article("第二十二条", "第二十三条")  # 决议内容违反法律、行政法规的无效
A24 = article("第二十四条", "第二十五条")  # 五十个以下股东
PASSAGES = [A45, A41, A35, A22, A24]
LABELS = ["《中华人民共和国公司法》第四十五条", "《中华人民共和国公司法》第四十一条", "《中华人民共和国公司法》第三十五条",
          "《中华人民共和国公司法》第二十二条", "《中华人民共和国公司法》第二十四条"]


def claims_of(answer: str, passages=PASSAGES, labels=LABELS):
    return score_answer("q", answer, "llm", passages, labels=labels).claims


# (answer, supported, the start of its why) — one claim each
CASES = [
    # faithful: quotes and paraphrases, whatever the citation frame
    ("根据《中华人民共和国公司法》第四十五条[1]，董事任期由公司章程规定，但每届任期不得超过三年。", True, "found in passage [1]"),
    ("《公司法》第四十一条规定：召开股东会会议，应当于会议召开十五日前通知全体股东。[2]", True, "found in passage [2]"),
    ("董事任期届满，连选可以连任（《公司法》第四十五条[1]）。", True, "found in passage [1]"),
    ("公司成立后，股东不能抽逃出资[3]。", True, "found"),  # 不得 -> 不能: the same prohibition
    ("董事每届任期最长三年[1]。", True, "found"),  # 不得超过三年 = 最长三年: one comparison
    ("召开股东会会议，应当于会议召开十五天前通知全体股东[2]。", True, "found"),  # 日 = 天
    # modality
    ("根据《公司法》第三十五条[3]，公司成立后，股东可以抽逃出资。", False, "modality differs: 可以 vs 不得"),
    ("召开股东会会议，可以不通知全体股东[2]。", False, "modality differs: 可以不 vs 应当"),
    ("召开股东会会议，无需于会议召开十五日前通知全体股东[2]。", False, "modality differs: 无需 vs 应当"),
    ("董事任期届满，连选不得连任[1]。", False, "modality differs: 不得 vs 可以"),
    ("公司成立后，股东抽逃出资[3]。", False, "modality dropped: 不得"),
    # negation
    ("公司股东会或者股东大会、董事会的决议内容违反法律、行政法规的有效[4]。", False, "negation removed: 无"),
    ("公司股东会或者股东大会、董事会的决议内容不违反法律、行政法规的无效[4]。", False, "negation added: 不"),
    # comparison and numbers
    ("董事任期由公司章程规定，但每届任期不得少于三年[1]。", False, "comparison differs: 不得少于 vs 不得超过"),
    ("董事任期由公司章程规定，但每届任期不得超过五年[1]。", False, "number differs: 五年 vs 三年"),
    ("召开股东会会议，应当于会议召开三十日前通知全体股东[2]。", False, "number differs: 三十日 vs 十五日"),
    ("召开股东会会议，应当于会议召开十五个月前通知全体股东[2]。", False, "unit differs: 十五个月 vs 十五日"),
    ("有限责任公司由100个以下股东出资设立[5]。", False, "number not in the passage: 100"),
    # citations
    ("根据《中华人民共和国公司法》第九百九十九条[1]，董事任期由公司章程规定。", False,
     "cites 第九百九十九条, an article in none of the passages sent"),
    ("根据《公司法》第四十一条[1]，董事任期由公司章程规定。", False,
     "cites 第四十一条, which is in passage [2], not in passage [1]"),
    ("依据《中华人民共和国劳动法》[1]，董事任期由公司章程规定。", False, "cites 《中华人民共和国劳动法》, a law in none"),
    ("董事任期由公司章程规定，但每届任期不得超过三年[7]。", False, "cites passage [7], which was not sent"),
    ("董事任期由公司章程规定，但每届任期不得超过三年[3]。", False, "not in passage [3]"),  # wrong number
    # invented
    ("有限责任公司股东会每年至少召开两次定期会议[1]。", False, "not found in the passages"),
    ("用人单位可以随时无理由辞退劳动者且无需支付任何补偿。", False, "not found in the passages"),
]


@pytest.mark.parametrize("answer,supported,why", CASES, ids=[c[2][:30] for c in CASES])
def test_each_claim_is_checked_for_words_meaning_numbers_and_citations(answer, supported, why):
    (claim,) = claims_of(answer)
    assert (claim.supported, claim.why[:len(why)]) == (supported, why), claim.why


def test_an_answer_scores_the_share_of_its_claims_supported_and_lists_each():
    q = score_answer("q", "董事任期由公司章程规定[1]。公司成立后，股东可以抽逃出资[3]。", "llm", PASSAGES, labels=LABELS)
    assert q.groundedness == 0.5 and not q.refusal
    assert q.as_json()["claims"] == [
        {"text": "董事任期由公司章程规定[1]。", "supported": True, "passage": 1, "why": "found in passage [1] (100% of its words)"},
        {"text": "公司成立后，股东可以抽逃出资[3]。", "supported": False, "passage": 3,
         "why": "modality differs: 可以 vs 不得 (passage [3])"}]


def test_a_frame_alone_that_cites_what_was_not_sent_is_an_unsupported_claim():
    """"根据…第九百九十九条[7]：" on a line of its own, the list under it from the passages: the frame claims a
    source that was not sent, so it counts (a frame that cites what was sent is no claim at all)."""
    q = score_answer("q", "根据《中华人民共和国劳动法》第九百九十九条[7]：\n董事任期由公司章程规定；\n董事任期届满，连选可以连任。",
                     "llm", PASSAGES, labels=LABELS)
    assert [c.supported for c in q.claims] == [False, True, True] and q.groundedness == 0.6667
    assert q.claims[0].why.startswith("cites passage [7], which was not sent")
    fine = score_answer("q", "根据《中华人民共和国公司法》第四十五条[1]：\n董事任期由公司章程规定；", "llm", PASSAGES, labels=LABELS)
    assert [c.supported for c in fine.claims] == [True] and fine.groundedness == 1.0


def test_a_citation_mark_after_the_full_stop_belongs_to_the_sentence_before():
    (claim,) = claims_of("董事任期由公司章程规定，但每届任期不得超过三年。[3]")
    assert claim.text.endswith("[3]") and not claim.supported and "not in passage [3]" in claim.why


REFUSALS = ["根据检索到的条文无法确定。", "根据检索到的条文无法确定股东能否抽回出资。", "检索到的法条片段未涉及该问题。",
            "所提供的条文中没有关于这一问题的规定，因此无法回答。", "无法确定。",
            "The passages do not say whether the obligations survive termination.",
            "The provided passages do not address this question.", "I cannot determine this from the passages provided.",
            "There is no information in the passages about this."]
# statutes and contracts say "难以确定的", "仍不能确定的", "does not contain": conditions, not refusals
NOT_REFUSALS = ["难以确定责任大小的，平均承担责任。", "依据本法第五百一十条的规定仍不能确定的，适用下列规定：",
                "当事人未采用书面形式，无法确定租赁期限的，视为不定期租赁。",
                "If the contract does not contain the requirements, the contractor will handle the property with care.",
                "董事任期由公司章程规定，但每届任期不得超过三年。"]


@pytest.mark.parametrize("sentence", REFUSALS)
def test_a_refusal_is_recognised(sentence):
    assert is_refusal(sentence)


@pytest.mark.parametrize("sentence", NOT_REFUSALS)
def test_a_statutes_own_conditions_are_not_refusals(sentence):
    assert not is_refusal(sentence)


def test_an_honest_refusal_is_not_an_ungrounded_claim():
    q = score_answer("q", "根据检索到的条文无法确定。", "llm", PASSAGES, labels=LABELS)
    assert (q.refusal, q.groundedness) == (True, None)
    assert q.as_json()["claims"] == [{"text": "根据检索到的条文无法确定。", "supported": None, "passage": None,
                                      "why": "a refusal: says the passages do not answer, not a claim"}]
    mixed = score_answer("q", "根据检索到的条文无法确定期限。董事任期由公司章程规定[1]。", "llm", PASSAGES, labels=LABELS)
    assert (mixed.refusal, mixed.groundedness) == (False, 1.0)  # the refusal sentence is left out, the claim counts
    advised = score_answer("q", "根据检索到的条文无法确定。建议您咨询专业律师。", "llm", PASSAGES, labels=LABELS)
    assert (advised.refusal, advised.groundedness) == (True, None)  # advice is no claim either
    english = score_answer("q", "The passages do not say. You may wish to consult a qualified lawyer.", "llm", [EN])
    assert (english.refusal, english.groundedness) == (True, None)
    advice_only = score_answer("q", "建议咨询律师。", "llm", PASSAGES, labels=LABELS)
    assert (advice_only.refusal, advice_only.groundedness) == (False, None)


def test_a_quote_that_is_mostly_digits_meets_its_chinese_passage():
    """0.8 cut a digit-heavy sentence into 4-grams and its passage into bigrams: an exact quote scored 0."""
    table = FEES[FEES.index("1000元以下的部分"):FEES.index("1000001元以上的部分")]
    quote = "1001元至50000元的部分 按4%－5%交纳"
    assert quote in table
    q = score_answer("q", f"{quote}[1]。", "llm", [table], labels=["《仲裁委员会仲裁收费办法》附件"])
    assert q.groundedness == 1.0, q.claims
    changed = score_answer("q", "1001元至50000元的部分 按6%－7%交纳[1]。", "llm", [table])
    assert changed.groundedness == 0.0 and "number" in changed.claims[0].why, changed.claims


def test_an_article_shown_in_the_passage_label_was_sent():
    """A chunk that starts mid-article has its article in the label only: citing it is valid."""
    tail = A45.split("。", 1)[1]  # 董事任期届满，连选可以连任。 — no 第四十五条 in the text
    q = score_answer("q", "根据《公司法》第四十五条[1]，董事任期届满，连选可以连任。", "llm", [tail],
                     labels=["《中华人民共和国公司法》第四十五条"])
    assert q.invalid_citations == [] and q.groundedness == 1.0
    unlabelled = score_answer("q", "根据《公司法》第四十五条[1]，董事任期届满，连选可以连任。", "llm", [tail])
    assert "article 45" in [b["citation"] for b in unlabelled.invalid_citations] and unlabelled.groundedness == 0.0


@pytest.mark.parametrize("text,expected", [
    ("每届任期不得超过三年", [(3, "year")]), ("应当在三十日内", [(30, "day")]), ("十五天", [(15, "day")]),
    ("罚款5万元以上十五万元以下", [(50000, "yuan"), (150000, "yuan")]), ("百分之二十五", [(25, "percent")]),
    ("三分之二以上", [(2 / 3, "fraction")]), ("一人有限责任公司", [(1, "person")]), ("统一的规定", []),
    ("依照本法第四十六条、第二款", []), ("第五十一年", [(51, "year")]),
    ("within thirty (30) days", [(30, "day")]), ("$250,000 within 5 business days", [(250000, "usd"), (5, "workday")]),
])
def test_numbers_are_read_as_values_with_units_in_either_script(text, expected):
    assert [(round(n.value, 6), n.unit) for n in numbers(text)] == [(round(v, 6), u) for v, u in expected]


EN = ("2.05 No Disclosure. Except as set forth in Section 2.06, the Receiving Party shall not disclose any of the "
      "Confidential Information to any Person other than its Representatives who have a need to know such "
      "Confidential Information. The Receiving Party may disclose Confidential Information within thirty (30) days "
      "of a written request.")


@pytest.mark.parametrize("answer,supported,why", [
    ("Under Section 2.05 [1], the Receiving Party shall not disclose any of the Confidential Information to any "
     "Person other than its Representatives.", True, "found"),
    ("The recipient must not disclose any Confidential Information to any Person other than its Representatives "
     "who need to know it [1].", True, "found"),
    ("The Receiving Party may disclose any of the Confidential Information to any Person other than its "
     "Representatives [1].", False, "modality differs: may vs shall not"),
    ("The Receiving Party may disclose Confidential Information within sixty (60) days of a written request [1].",
     False, "number differs"),
    ("The Receiving Party shall pay liquidated damages of $250,000 for each breach of this Agreement [1].", False,
     "not found in the passages"),
    ("Under Section 9.9 [1], the Receiving Party shall not disclose any of the Confidential Information.", False,
     "cites Section 9.9"),
])
def test_english_claims_are_checked_the_same_way(answer, supported, why):
    (claim,) = claims_of(answer, [EN], ["NDA, §2.05"])
    assert (claim.supported, claim.why[:len(why)]) == (supported, why), claim.why
