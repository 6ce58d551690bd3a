"""An answer's claims, each checked against the passages sent (no model, about a millisecond an answer).

A claim is a sentence of the answer (split at 。！？；; and ". "; a citation mark written after the full
stop belongs to the sentence before it). Its citation frame (《…》, 第X条, Section 2.04, [n], 根据…规定，
"Under …,") is set apart: the frame is checked as a citation, the rest as a statement. A claim is
*supported* when every check passes, in this order (the first failure is its `why`):

1. a refusal ("根据检索到的条文无法确定", "The passages do not say …") is not a claim, nor advice to consult a
   lawyer: `supported` null;
2. its [n] marks point at passages that were sent;
3. the laws it names appear in the passages sent (their text or labels), and its article or section
   numbers in the passages it cites (or, citing none, in any): an article shown in a passage's label
   counts (a chunk that starts mid-article is labelled with its article);
4. enough of it is found in a passage it cites, or citing none, in any passage sent: the share of its
   unit bigrams (a unit is a CJK character, an English word stem or a number, so a quote of digits meets
   its passage at the same size) held by the passage, at least SUPPORTED_AT;
5. its meaning is that of the passage sentences it matches best (rag_app/quality/meaning.py): the same
   legal modality, the same negation, and every number, amount, duration or percentage it states.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from rag_app.quality.lexicon import is_advice, is_refusal
from rag_app.quality.meaning import meaning_differs, number_differs
from rag_app.quality.units import bigrams, coverage, units
from rag_app.text.legal_numbers import ARTICLE_REF, find_article_refs

SUPPORTED_AT = 0.5  # share of a claim's unit bigrams found in the passage (measured: docs/quality.md)
MIN_GRAMS = 3  # shorter fragments ("综上。") are not claims
MAX_SPAN = 3  # a claim is compared with at most this many consecutive passage sentences
REFUSAL_WHY = "a refusal: says the passages do not answer, not a claim"

CITE = re.compile(r"\[(\d{1,3})\]")
LAW = re.compile(r"《([^《》]{2,40})》")
PRC = "中华人民共和国"
_SENTENCE = re.compile(r"(?<=[。！？!?；;\n])|(?<=[.])\s+")
_PASSAGE_SENTENCE = re.compile(r"(?<=[。！？!?；;\n])|(?<=[.;])\s+")
_LEAD_CITES = re.compile(r"^(?:\s*\[\d{1,3}\])+")
_ZH_REF = re.compile(ARTICLE_REF.pattern + r"(?:第[零〇一二两三四五六七八九十百千\d]+[款项目])*")
_ZH_SUBREF = re.compile(r"第[零〇一二两三四五六七八九十百千\d]+[款项目]")
_EN_REF = re.compile(r"(?:\b(?:sections?|clauses?|articles?|paragraphs?|§)\s*"
                     r"(?P<sec>\d+(?:\.\d+)*|[IVXLC]+\b)(?:\s*\([a-z0-9]{1,4}\))*|§)", re.I)
# what is left of a citation frame once 《…》, 第X条 and [n] are gone: 根据，/ 依据的规定，/ 规定：
_ZH_LEAD = re.compile(r"^[\s，,：:。、]*(?:(?:根据|依据|依照|按照|参照|据|按|对照|结合|另据)[\s、和及与以]*"
                      r"(?:该法|本法|上述|前述|相关|该|其|此)?(?:的)?(?:相关)?(?:规定|条款|条文|之规定|内容|明确规定)?"
                      r"(?:可知|来看|所述|中|里)?[\s，,：:]*)?(?:的?(?:明确)?规定[\s，,：:]+)?")
_EN_LEAD = re.compile(r"^\s*(?:(?:under|according\s+to|per|pursuant\s+to|as\s+(?:stated|provided|set\s+out|set\s+forth|"
                      r"described|specified)\s+in|in\s+accordance\s+with|based\s+on)\b[^,]{0,80},\s*"
                      r"|(?:the|this|that)\s+(?:\w+\s+){0,2}(?:agreement|nda|contract|passage|clause|section|provision|"
                      r"text)s?\s+(?:\w+\s+)?(?:provides|states|says|requires|specifies|stipulates|notes|explains)\s+"
                      r"(?:that\s+)?)", re.I)
_EMPTY_BRACKETS = re.compile(r"[（(]\s*[、，,;；\s]*\s*[）)]")


@dataclass(frozen=True)
class Claim:
    """One sentence of an answer and whether the passages support it. `passage`: the 1-based number of
    the passage it matched best (None when it matched none); `why`: the reason, in words."""

    text: str
    supported: bool | None  # None: a refusal, not a claim
    passage: int | None
    why: str

    def as_json(self) -> dict:
        return {"text": self.text, "supported": self.supported, "passage": self.passage, "why": self.why}


@dataclass(frozen=True)
class Passage:
    """A passage as sent: its text and the label the model saw ("《公司法》第五十七条")."""

    text: str
    label: str = ""


def answer_sentences(answer: str) -> list[str]:
    """The answer's sentences; a citation mark after a full stop ("…规定。[1]") joins the sentence before."""
    out: list[str] = []
    for s in _SENTENCE.split(answer):
        if not s or not s.strip():
            continue
        lead = _LEAD_CITES.match(s)
        if lead and out:
            out[-1] += lead.group(0).strip()
            s = s[lead.end():]
            if not s.strip():
                continue
        out.append(s.strip())
    return out


def statement(sentence: str) -> str:
    """The sentence without its citation frame: what it says, as opposed to where it says it is from."""
    s = CITE.sub("", sentence)
    s = LAW.sub("", s)
    s = _ZH_REF.sub("", s)
    s = _ZH_SUBREF.sub("", s)
    s = _EN_REF.sub("", s)
    s = _EMPTY_BRACKETS.sub("", s)
    s = _ZH_LEAD.sub("", s, count=1)
    s = _EN_LEAD.sub("", s, count=1)
    return s.strip(" ，,：:")


@lru_cache(maxsize=4096)
def _passage_grams(text: str) -> frozenset[str]:
    return frozenset(bigrams(units(text)))


@lru_cache(maxsize=4096)
def _passage_units(text: str) -> frozenset[str]:
    return frozenset(units(text))


def support(us: list[str], grams: set[str], passage: str) -> float:
    """How much of a claim a passage holds: the share of its unit bigrams the passage has; for an English
    claim, the mean of that and the share of its words the passage has (a paraphrase reorders English
    words more than it changes them; word pairs alone read a reordered clause as new)."""
    held = coverage(grams, _passage_grams(passage))
    latin = sum("a" <= u[0] <= "z" for u in us)
    if not us or latin * 2 < len(us):
        return held
    words = _passage_units(passage)
    return (held + sum(u in words for u in us) / len(us)) / 2


@lru_cache(maxsize=1024)
def _passage_sentences(text: str) -> tuple[tuple[str, frozenset[str]], ...]:
    out = []
    for s in _PASSAGE_SENTENCE.split(text):
        if s and s.strip():
            out.append((s.strip(), frozenset(bigrams(units(s)))))
    return tuple(out)


def best_span(grams: set[str], passage: str, context: int = 0) -> str:
    """The run of at most MAX_SPAN consecutive sentences of `passage` holding most of the claim's grams,
    with `context` sentences more on each side."""
    sents = _passage_sentences(passage)
    if not sents:
        return passage
    scores = [len(grams & g) for _, g in sents]
    i = max(range(len(sents)), key=scores.__getitem__)
    lo, hi, held = i, i + 1, set(grams & sents[i][1])
    while hi - lo < MAX_SPAN:
        gains = []
        if lo > 0:
            gains.append((len((grams & sents[lo - 1][1]) - held), -1))
        if hi < len(sents):
            gains.append((len((grams & sents[hi][1]) - held), 1))
        if not gains:
            break
        gain, side = max(gains)
        if gain < 2:  # a neighbour adding a gram or two is chance, not the rest of the claim
            break
        if side < 0:
            lo -= 1
            held |= grams & sents[lo][1]
        else:
            held |= grams & sents[hi][1]
            hi += 1
    lo, hi = max(0, lo - context), min(len(sents), hi + context)
    return "".join(s for s, _ in sents[lo:hi]) if _cjk(passage) else " ".join(s for s, _ in sents[lo:hi])


def _cjk(text: str) -> bool:
    return bool(re.search(r"[\u3400-\u9fff]", text[:200]))


def _law_known(name: str, sent: str) -> bool:
    return name in sent or name.removeprefix(PRC) in sent


def _sections(text: str) -> set[str]:
    """Section numbers an English text shows (2.04, 5, IV), and each one's leading parts (2 of 2.04)."""
    out: set[str] = set()
    for m in re.finditer(r"(?<![\w.])(\d+(?:\.\d+)*)(?![\w])|\b([IVXLC]+)\b", text):
        sec = m.group(1) or m.group(2)
        parts = sec.split(".")
        out.update(".".join(parts[:k]) for k in range(1, len(parts) + 1))
    return out


def _citation_problem(sentence: str, cited: list[int], passages: Sequence[Passage], pool: list[int],
                      everything: str) -> str | None:
    """Why the sentence's citation frame is wrong, or None."""
    bad = [n for n in cited if not 1 <= n <= len(passages)]
    if bad:
        return f"cites passage [{bad[0]}], which was not sent ({len(passages)} were)"
    for name in dict.fromkeys(LAW.findall(sentence)):
        if not _law_known(name, everything):
            return f"cites 《{name}》, a law in none of the passages sent"
    refs = list(dict.fromkeys(find_article_refs(sentence)))
    if refs:
        in_pool = set(find_article_refs("\n".join(passages[i].label + "\n" + passages[i].text for i in pool)))
        for key in refs:
            if key in in_pool:
                continue
            where = [i + 1 for i, p in enumerate(passages) if key in find_article_refs(p.label + "\n" + p.text)]
            art = _article_words(sentence, key)
            if where:
                return f"cites {art}, which is in passage [{where[0]}], not in {_cited(cited)}"
            return f"cites {art}, an article in none of the passages sent"
    for m in _EN_REF.finditer(sentence):
        sec = m.group("sec")
        if not sec:
            continue
        if sec not in _sections("\n".join(passages[i].label + "\n" + passages[i].text for i in pool)):
            return f"cites {m.group(0).strip()}, which is in none of {_cited(cited) if cited else 'the passages sent'}"
    return None


def _frames(sentence: str) -> bool:
    """Whether a sentence names a source: a [n] mark, a law or an article."""
    return bool(CITE.search(sentence) or LAW.search(sentence) or ARTICLE_REF.search(sentence))


def _article_words(sentence: str, key: str) -> str:
    for m in ARTICLE_REF.finditer(sentence):
        if find_article_refs(m.group(0)) == [key]:
            return m.group(0)
    return f"article {key}"


def _cited(cited: list[int]) -> str:
    return ", ".join(f"passage [{n}]" for n in dict.fromkeys(cited)) if cited else "the passages sent"


def check_sentence(sentence: str, passages: Sequence[Passage], everything: str) -> Claim | None:
    """The claim a sentence makes and its check; None for a fragment too short to be a claim."""
    if is_refusal(sentence):
        return Claim(sentence, None, None, REFUSAL_WHY)
    if is_advice(sentence):
        return Claim(sentence, None, None, "advice to ask someone, not a claim about the passages")
    said = statement(sentence)
    us = units(said)
    grams = bigrams(us)
    cited = [int(n) for n in CITE.findall(sentence)]
    pool = [n - 1 for n in dict.fromkeys(cited) if 1 <= n <= len(passages)] if cited else list(range(len(passages)))
    if len(grams) < MIN_GRAMS:  # a fragment says nothing, unless it names a source that was not sent
        problem = _citation_problem(sentence, cited, passages, pool, everything) if _frames(sentence) else None
        return None if problem is None else Claim(sentence, False, None, problem)
    problem = _citation_problem(sentence, cited, passages, pool, everything)
    shares = {i: support(us, grams, passages[i].text) for i in pool}
    best = max(shares, key=shares.__getitem__) if shares else None
    if problem:
        return Claim(sentence, False, None if best is None else best + 1, problem)
    if best is None or shares[best] < SUPPORTED_AT:
        share = 0.0 if best is None else shares[best]
        elsewhere = _better_elsewhere(us, grams, passages, pool) if cited else None
        if elsewhere is not None:
            return Claim(sentence, False, best + 1 if best is not None else None,
                         f"not in {_cited(cited)} ({share:.0%} of its words); it matches passage [{elsewhere + 1}]")
        return Claim(sentence, False, None if best is None else best + 1,
                     f"not found in the passages: at most {share:.0%} of its words are in {_cited(cited)}"
                     if cited else f"not found in the passages: at most {share:.0%} of its words are in one")
    span = best_span(grams, passages[best].text)
    why = meaning_differs(said, span) or number_differs(said, span)
    if why:
        return Claim(sentence, False, best + 1, f"{why} (passage [{best + 1}])")
    return Claim(sentence, True, best + 1, f"found in passage [{best + 1}] ({shares[best]:.0%} of its words)")


def _better_elsewhere(us: list[str], grams: set[str], passages: Sequence[Passage], pool: list[int]) -> int | None:
    others = {i: support(us, grams, p.text) for i, p in enumerate(passages) if i not in pool}
    if not others:
        return None
    i = max(others, key=others.__getitem__)
    return i if others[i] >= SUPPORTED_AT else None


def check_claims(answer: str, passages: Sequence[Passage], titles: Sequence[str] = ()) -> list[Claim]:
    """Every claim (and refusal) of the answer, in order."""
    everything = "\n".join([*(p.label for p in passages), *(p.text for p in passages), *titles])
    out = []
    for s in answer_sentences(answer):
        c = check_sentence(s, passages, everything)
        if c is not None:
            out.append(c)
    return out
