"""The words that carry a legal sentence's meaning beyond its topic, in Chinese and English: modality
(what must, may, must not or need not be done), negation, comparison with a number, and the wording of
an honest refusal. Lists, not a model: each entry is a word a statute or contract uses, so what the
meaning check (rag_app/quality/meaning.py) can and cannot see is readable here.

Modal classes (a sentence's deontic force; two words of one class say the same thing):
    OBL  obligation      应当 应 必须 须 有义务 / shall must will "is required to" "agrees to"
    PRO  prohibition     不得 禁止 严禁 不准 不能 无权 不应当 / "shall not" "must not" "may not" cannot
    PER  permission      可以 可 有权 允许 准予 享有 / may can "is entitled to" "has the right to"
    NOB  no obligation   可以不 不必 无需 无须 免除 免予 / "need not" "is not required to"
"""
from __future__ import annotations

import re
from collections.abc import Iterable

OBL, PRO, PER, NOB = "OBL", "PRO", "PER", "NOB"
NEG = "NEG"  # a negation that is not part of a modal word (不 未 没有 非 / not no never)
NEUTRAL = "-"  # a word that contains a negation character but negates nothing (不动产, 无论)

_ZH_MODAL = {
    PRO: "不得 禁止 严禁 不准 不许 不应当 不应该 不应 不能 不可以 无权 不允许 不宜",
    NOB: "可以不 可不 不必 无需 无须 不需要 不需 不用 免除 免予 免于 豁免 不再需要 没有义务 无义务",
    OBL: "应当 应该 必须 有义务 负有 须 应 理应",
    PER: "可以 有权 允许 准许 准予 享有 有权利 能够 可",
}
# words holding 应 / 可 / 须 / 不 / 无 / 非 / 未 that are neither modal nor negation
_ZH_PLAIN = ("相应 对应 适应 响应 供应 应用 应急 应对 回应 反应 应诉 应聘 答应 报应 应收 应付 应税 应征 "
             "可能 许可 认可 可靠 可行 可见 可供 可观 可疑 可否 不可抗力 必需 须知 "
             "不动产 无论 不论 除非 非常 不仅 不但 不久 不断 无数 并非 无偿 有偿 未来 毫无 ")
# words whose negation is a comparison with a number (不少于 三人 = at least three): number qualifiers
# 不得超过 N is a bound on N (= N 以下), not a prohibition: read as the comparison it is
_ZH_COMPARE = {">=": "不少于 不低于 至少 以上 不得少于 不得低于 不能少于 不能低于 不应少于 最少 最低",
               "<=": "不超过 不高于 至多 最多 以下 以内 不得超过 不得高于 不能超过 不能高于 不应超过 不得多于 最长 最高",
               "<": "不足 不满 未满 少于 低于", ">": "超过 多于 高于 逾"}
_ZH_NEG = "没有 未曾 并未 不 未 没 无 非 否 勿 毋"

_EN_MODAL = {
    PRO: ("shall not|must not|may not|will not|cannot|can not|can't|won't|shan't|mustn't|"
          "is not permitted to|are not permitted to|is prohibited from|are prohibited from|"
          "is not allowed to|are not allowed to|agrees not to|agree not to|shall refrain from|"
          "in no event shall|is not entitled to|are not entitled to|has no right to|shall have no right to|"
          "is forbidden to|are forbidden to"),
    NOB: ("need not|needs not|is not required to|are not required to|is not obligated to|are not obligated to|"
          "shall not be required to|shall not be obligated to|shall have no obligation to|has no obligation to|"
          "have no obligation to|is under no obligation to|are under no obligation to|is not obliged to|"
          "are not obliged to|is not bound to|are not bound to|is released from|are released from"),
    OBL: ("shall|must|will|is required to|are required to|agrees to|agree to|is obligated to|are obligated to|"
          "is obliged to|are obliged to|has an obligation to|undertakes to|undertake to|is bound to|are bound to"),
    PER: ("may|can|is entitled to|are entitled to|is permitted to|are permitted to|has the right to|"
          "have the right to|is free to|are free to|is allowed to|are allowed to"),
}
_EN_COMPARE = {">=": "no less than|not less than|at least|or more", "<=": "no more than|not more than|no later than|"
               "not later than|at most|up to|not exceeding|or less|or fewer|within", "<": "less than|fewer than|before",
               ">": "more than|greater than|exceeding|after"}
_EN_NEG = "not|no|never|none|neither|nor|without|nothing"
_EN_PLAIN = "notwithstanding|non-disclosure|non-exclusive|no\\."


def _zh_table() -> dict[str, str]:
    out: dict[str, str] = {}
    for word in _ZH_PLAIN.split():
        out[word] = NEUTRAL
    for cmp, words in _ZH_COMPARE.items():
        for word in words.split():
            out[word] = "CMP" + cmp
    for cls, words in _ZH_MODAL.items():
        for word in words.split():
            out.setdefault(word, cls)
    for word in _ZH_NEG.split():
        out.setdefault(word, NEG)
    return out


def _en_table() -> dict[str, str]:
    out: dict[str, str] = {}
    for word in _EN_PLAIN.split("|"):
        out[word.replace("\\", "")] = NEUTRAL
    for cmp, words in _EN_COMPARE.items():
        for word in words.split("|"):
            out[word] = "CMP" + cmp
    for cls in (PRO, NOB, OBL, PER):  # the negated phrases first: "shall not" is one word, not shall + not
        for word in _EN_MODAL[cls].split("|"):
            out.setdefault(word, cls)
    for word in _EN_NEG.split("|"):
        out.setdefault(word, NEG)
    return out


ZH_WORDS = _zh_table()
EN_WORDS = _en_table()


def _alternation(words: Iterable[str]) -> str:
    return "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in sorted(words, key=len, reverse=True))


# one scan of a text: a listed word (longest first), a number, an English word, one CJK character
WORD_RE = re.compile(
    rf"(?P<en>\b(?:{_alternation(EN_WORDS)})(?![\w-]))"
    r"|(?P<nt>\b[a-z]+n't\b)"
    rf"|(?P<zh>{_alternation(ZH_WORDS)})"
    r"|(?P<num>\d+(?:,\d{3})*(?:\.\d+)?)"
    r"|(?P<w>[a-z][a-z-]*[a-z]|[a-z])"
    r"|(?P<c>[\u3400-\u9fff])", re.I)


def word_class(token: str) -> str | None:
    """The class of one listed word (OBL, PRO, PER, NOB, NEG, CMP<op>, '-'), or None."""
    low = re.sub(r"\s+", " ", token.lower())
    return ZH_WORDS.get(token) or EN_WORDS.get(low)


# -- refusals: an answer (or sentence) saying the passages do not answer the question -----------------------
# what a refusal speaks of: the passages the model was given (never a statute's own words: a statute says
# "难以确定的，平均承担责任" and "仍不能确定的" dozens of times, as conditions, not refusals)
_ZH_EVIDENCE = (r"(?:检索|片段|法条|条文|所给|所提供的?(?:条文|片段|材料|信息|法条|内容|资料)|"
                r"(?:现有|上述|以上|已有|提供的)(?:条文|法条|信息|资料|材料|内容|规定))")
_ZH_CANNOT = re.compile(r"(?:无法|不能|难以|无从|没法)(?:确定|判断|回答|得出|确认|给出|作答|答复|得知|知晓|明确|认定)"
                        r"(?!的)")
_ZH_SAYS_NOTHING = re.compile(
    rf"{_ZH_EVIDENCE}[^，。；]{{0,8}}?(?:中|里|内)?(?:均|都|并|也)?(?:未|没有|没|不|无)(?:能)?"
    r"(?:涉及|提及|规定|说明|包含|提供|载明|明确|给出|回答|谈及|述及|载有|直接|相关|足以|充分)"
    r"|(?:未|没有|没)(?:能)?(?:检索|找|查)到"
    rf"|{_ZH_EVIDENCE}[^，。；]{{0,8}}?(?:不足以|不足|无法|不能)(?:回答|确定|说明|判断|支持)"
    r"|超出(?:了)?(?:所)?(?:提供|检索)")
_ZH_PLAIN_TEXT = re.compile(r"[^\u3400-\u9fff]")
_EN_SOURCE = (r"(?:passages?|provisions?|context|excerpts?|clauses?|texts?|sources?|documents?|materials?|"
              r"information|agreement|contract|sections?)")
_EN_SAYS_NOTHING = re.compile(
    rf"\b(?:(?:the|these|those)\s+(?:\w+\s+)?(?:passages?|excerpts?|context|snippets?)"
    rf"|(?:provided|given|retrieved|available|cited|numbered|above|quoted)\s+(?:\w+\s+)?{_EN_SOURCE})\b"
    r"[^.;]{0,60}?\b(?:do|does|did)\s*(?:not|n't)\s+(?:\w+\s+)?"
    r"(?:say|state|specify|address|mention|cover|contain|discuss|provide|answer|indicate|include|establish|"
    r"explain|describe|set\s+out|set\s+forth|deal\s+with|tell|show|speak|reveal|give)"
    rf"|\b(?:no|not\s+enough|insufficient|nothing)\s+(?:\w+\s+)?(?:information|provision|passage|clause|mention|"
    r"basis|evidence|answer)\b[^.;]{0,50}?\b(?:in|from|among|within)\s+(?:the\s+)?(?:provided\s+|given\s+|"
    rf"retrieved\s+)?(?:passages?|provisions|context|excerpts?|materials?|sources?)"
    rf"|\bnot\s+(?:\w+\s+)?(?:addressed|mentioned|covered|specified|stated|discussed|answered|found)\s+(?:in|by)\s+"
    r"(?:the\s+|any\s+)?(?:provided\s+|given\s+|retrieved\s+)?(?:passages?|context|excerpts?|materials?|sources?)"
    r"|\b(?:beyond|outside)\s+(?:the\s+scope\s+of\s+)?(?:the\s+)?(?:provided\s+|given\s+)?(?:passages|context|excerpts)",
    re.I)
_EN_CANNOT = re.compile(
    r"\b(?:cannot|can't|can\s+not|unable\s+to|not\s+able\s+to|could\s+not|couldn't|impossible\s+to)\s+(?:be\s+)?"
    r"(?:determine|determined|answer|answered|tell|told|confirm|confirmed|say|conclude|concluded|establish|established)",
    re.I)
_EN_EVIDENCE = re.compile(r"\b(?:passages?|provided|context|excerpts?|retrieved|information given|"
                          r"(?:from|on|based\s+on)\s+(?:the|these)\s+(?:\w+\s+)?(?:texts?|provisions|materials?))\b", re.I)
SHORT_REFUSAL_CHARS = 12  # "无法确定。" alone, with nothing to condition on, is a refusal


def _zh_refusal(sentence: str) -> bool:
    if _ZH_SAYS_NOTHING.search(sentence):
        return True
    if not _ZH_CANNOT.search(sentence):
        return False
    return bool(re.search(_ZH_EVIDENCE, sentence)) or len(_ZH_PLAIN_TEXT.sub("", sentence)) <= SHORT_REFUSAL_CHARS


def _en_refusal(sentence: str) -> bool:
    if _EN_SAYS_NOTHING.search(sentence):
        return True
    return bool(_EN_CANNOT.search(sentence) and _EN_EVIDENCE.search(sentence))


def is_refusal(sentence: str) -> bool:
    """Whether the sentence says the passages do not answer (根据检索到的条文无法确定 / The passages do not
    say ...): a statement about the evidence, not a claim about the law."""
    return _zh_refusal(sentence) or _en_refusal(sentence)


# advice to ask someone else: not a statement about the law the passages could support or not
_ADVICE = re.compile(
    r"(?:建议|请|不妨|最好)(?:您|你|当事人)?(?:及时)?(?:咨询|联系|寻求|请教|询问|向)[^。；]{0,12}?"
    r"(?:律师|法律专业人士|专业人士|法律顾问|法律援助|相关部门|主管部门)"
    r"|\b(?:consult|seek\s+(?:the\s+)?advice\s+(?:of|from)|speak\s+(?:with|to)|contact)\s+(?:a|an|your|qualified)\s+"
    r"(?:\w+\s+)?(?:lawyer|attorney|counsel|legal\s+(?:adviser|advisor|professional))", re.I)


def is_advice(sentence: str) -> bool:
    """Whether the sentence only advises asking a lawyer or an authority (建议咨询专业律师 / consult a lawyer)."""
    return bool(_ADVICE.search(sentence))
