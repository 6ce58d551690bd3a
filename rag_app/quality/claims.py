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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rag_app.quality.lexicon import is_advice, is_refusal
from rag_app.quality.meaning import meaning_differs, number_differs
from rag_app.quality.units import bigrams, coverage, units
from rag_app.text import ARTICLE_REF, find_article_refs

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

    def as_json(self) -> dict[str, Any]:
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


_Sentences = tuple[tuple[str, frozenset[str]], ...]  # each sentence of a passage and its unit bigrams


@lru_cache(maxsize=1024)
def _passage_sentences(text: str) -> _Sentences:
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
    lo, hi = _grown(grams, sents, max(range(len(sents)), key=scores.__getitem__))
    lo, hi = max(0, lo - context), min(len(sents), hi + context)
    return ("" if _cjk(passage) else " ").join(s for s, _ in sents[lo:hi])


def _grown(grams: set[str], sents: _Sentences, i: int) -> tuple[int, int]:
    """Sentence i and the neighbours taken one at a time, the one adding more of the claim's grams first,
    up to MAX_SPAN sentences: [lo, hi)."""
    lo, hi, held = i, i + 1, set(grams & sents[i][1])
    while hi - lo < MAX_SPAN:
        gain, side = _best_neighbour(grams, sents, lo, hi, held)
        if gain < 2:  # a neighbour adding a gram or two is chance, not the rest of the claim
            break
        if side < 0:
            lo -= 1
            held |= grams & sents[lo][1]
        else:
            held |= grams & sents[hi][1]
            hi += 1
    return lo, hi


def _best_neighbour(grams: set[str], sents: _Sentences, lo: int, hi: int, held: set[str]) -> tuple[int, int]:
    """(grams not yet held, side) of the better of the sentences either side of [lo, hi): -1 before, 1
    after; (0, 0) when there is none."""
    gains = []
    if lo > 0:
        gains.append((len((grams & sents[lo - 1][1]) - held), -1))
    if hi < len(sents):
        gains.append((len((grams & sents[hi][1]) - held), 1))
    return max(gains) if gains else (0, 0)


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


@dataclass(frozen=True)
class _Reading:
    """A sentence read for its checks: what it says (its statement, the statement's units and bigrams), its
    [n] marks, the passages sent, the ones it may be checked against (`pool`: those it cites that were sent,
    citing none, all of them) and all the text sent (`everything`: labels, passages, titles)."""

    sentence: str
    said: str
    said_units: list[str]
    grams: set[str]
    cited: list[int]
    pool: list[int]
    passages: Sequence[Passage]
    everything: str

    @classmethod
    def of(cls, sentence: str, passages: Sequence[Passage], everything: str) -> _Reading:
        said = statement(sentence)
        us = units(said)
        cited = [int(n) for n in CITE.findall(sentence)]
        pool = [n - 1 for n in dict.fromkeys(cited) if 1 <= n <= len(passages)] if cited else list(range(len(passages)))
        return cls(sentence, said, us, bigrams(us), cited, pool, passages, everything)

    @property
    def pool_text(self) -> str:
        """The labels and texts of the passages in the pool: where its articles and sections must be."""
        return "\n".join(self.passages[i].label + "\n" + self.passages[i].text for i in self.pool)


# -- the citation frame's checks, in order: each returns why the frame is wrong, or None -----------------------

def _passage_not_sent(r: _Reading) -> str | None:
    bad = [n for n in r.cited if not 1 <= n <= len(r.passages)]
    return f"cites passage [{bad[0]}], which was not sent ({len(r.passages)} were)" if bad else None


def _law_not_sent(r: _Reading) -> str | None:
    unknown = [name for name in dict.fromkeys(LAW.findall(r.sentence)) if not _law_known(name, r.everything)]
    return f"cites 《{unknown[0]}》, a law in none of the passages sent" if unknown else None


def _article_not_cited(r: _Reading) -> str | None:
    """An article (第X条) not in the passages it cites (citing none, in none sent); says where it is, if sent."""
    refs = list(dict.fromkeys(find_article_refs(r.sentence)))
    if not refs:
        return None
    in_pool = set(find_article_refs(r.pool_text))
    key = next((k for k in refs if k not in in_pool), None)
    if key is None:
        return None
    where = [i + 1 for i, p in enumerate(r.passages) if key in find_article_refs(p.label + "\n" + p.text)]
    art = _article_words(r.sentence, key)
    if where:
        return f"cites {art}, which is in passage [{where[0]}], not in {_cited(r.cited)}"
    return f"cites {art}, an article in none of the passages sent"


def _section_not_cited(r: _Reading) -> str | None:
    """An English section, clause or article number not in the passages it cites (citing none, in none sent)."""
    shown = [m for m in _EN_REF.finditer(r.sentence) if m.group("sec")]
    if not shown:
        return None
    in_pool = _sections(r.pool_text)
    missing = next((m for m in shown if m.group("sec") not in in_pool), None)
    return None if missing is None else f"cites {missing.group(0).strip()}, which is in none of {_cited(r.cited)}"


CITATION_CHECKS: tuple[Callable[[_Reading], str | None], ...] = (
    _passage_not_sent, _law_not_sent, _article_not_cited, _section_not_cited)


def _citation_problem(r: _Reading) -> str | None:
    """Why the sentence's citation frame is wrong, or None."""
    for check in CITATION_CHECKS:
        why = check(r)
        if why is not None:
            return why
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


@dataclass(frozen=True)
class _Best:
    """The passage of the pool holding most of the claim (`index` None: the pool is empty) and that share."""

    index: int | None
    share: float

    @property
    def number(self) -> int | None:
        """Its 1-based number, as [n] marks and Claim.passage count."""
        return None if self.index is None else self.index + 1


def _best_passage(r: _Reading) -> _Best:
    shares = {i: support(r.said_units, r.grams, r.passages[i].text) for i in r.pool}
    if not shares:
        return _Best(None, 0.0)
    best = max(shares, key=shares.__getitem__)
    return _Best(best, shares[best])


# -- a claim's checks, in order (CLAIM_CHECKS): each returns why it is not supported, or None -------------------

def _not_found(r: _Reading, best: _Best) -> str | None:
    """Too little of the claim is in the passages it cites (citing none, in any); says which passage it
    matches instead, if one it did not cite does."""
    if best.index is not None and best.share >= SUPPORTED_AT:
        return None
    elsewhere = _better_elsewhere(r.said_units, r.grams, r.passages, r.pool) if r.cited else None
    if elsewhere is not None:
        return f"not in {_cited(r.cited)} ({best.share:.0%} of its words); it matches passage [{elsewhere + 1}]"
    where = _cited(r.cited) if r.cited else "one"
    return f"not found in the passages: at most {best.share:.0%} of its words are in {where}"


def _meaning_changed(r: _Reading, best: _Best) -> str | None:
    """Its words are the passage's, its modality, negation or numbers are not (rag_app/quality/meaning.py)."""
    if best.index is None:  # _not_found has said so
        return None
    span = best_span(r.grams, r.passages[best.index].text)
    why = meaning_differs(r.said, span) or number_differs(r.said, span)
    return f"{why} (passage [{best.number}])" if why else None


def _citation_wrong(r: _Reading, best: _Best) -> str | None:
    return _citation_problem(r)


CLAIM_CHECKS: tuple[Callable[[_Reading, _Best], str | None], ...] = (_citation_wrong, _not_found, _meaning_changed)

NOT_CLAIMS: tuple[tuple[Callable[[str], bool], str], ...] = (
    (is_refusal, REFUSAL_WHY), (is_advice, "advice to ask someone, not a claim about the passages"))


def check_sentence(sentence: str, passages: Sequence[Passage], everything: str) -> Claim | None:
    """The claim a sentence makes and its check; None for a fragment too short to be a claim."""
    not_a_claim = next((why for says, why in NOT_CLAIMS if says(sentence)), None)
    if not_a_claim is not None:
        return Claim(sentence, None, None, not_a_claim)
    r = _Reading.of(sentence, passages, everything)
    if len(r.grams) < MIN_GRAMS:  # a fragment says nothing, unless it names a source that was not sent
        problem = _citation_problem(r) if _frames(sentence) else None
        return None if problem is None else Claim(sentence, False, None, problem)
    best = _best_passage(r)
    for check in CLAIM_CHECKS:
        why = check(r, best)
        if why is not None:
            return Claim(sentence, False, best.number, why)
    return Claim(sentence, True, best.number, f"found in passage [{best.number}] ({best.share:.0%} of its words)")


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
