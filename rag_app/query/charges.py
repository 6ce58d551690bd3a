"""Charge-aware retrieval: a case description that names its charges (罪名:故意伤害;开设赌场, the
form of CAIL / LawBench case-fact questions) is asking for the 刑法 articles that define those
crimes. BM25 drowns the charge in the facts' many words (court, hospital, amounts); the charge
itself is a near-literal quote of the defining article's opening: 故意伤害 -> "故意伤害他人身体的",
开设赌场 -> "开设赌场的", 受贿 -> "...是受贿罪".

So, like a cited article number, a named charge is looked up directly: every paragraph (款) of the
criminal law in the collection is scored by how much of the charge its opening clause holds
(character bigrams), and the best chunk per charge goes to the front of the ranking.
"""
from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass
from itertools import accumulate

_CHARGES = re.compile(r"罪名\s*[:：]\s*([^\n。]+)")
_SPLIT = re.compile(r"[;；,，]")
_ARTICLE_HEAD = re.compile(r"^\s*第[一二三四五六七八九十百千零〇\d]+\s*条(?:之[一二三四五六七八九十]+)?\s*")
OPENING_CHARS = 40  # a defining clause names the act within its first words
MIN_SCORE = 0.6  # share of the charge's bigrams the opening must hold
# A question's charge field is user input: bound the lookups it can cause. Real charge names are under
# 30 characters (the longest in dev: 非法买卖、运输、携带、持有毒品原植物种子、幼苗, 23) and cases name a handful.
MAX_CHARGE_CHARS = 40
MAX_CHARGES = 8


def named_charges(question: str) -> list[str]:
    """['故意伤害', '开设赌场'] from '... 罪名:故意伤害;开设赌场。'; [] when the question names none."""
    m = _CHARGES.search(question)
    if not m:
        return []
    out: list[str] = []
    for part in _SPLIT.split(m.group(1)):
        name = part.strip().removesuffix("罪").strip()
        if 2 <= len(name) <= MAX_CHARGE_CHARS and name not in out:
            out.append(name)
            if len(out) == MAX_CHARGES:
                break
    return out


def _bigrams(text: str) -> set[str]:
    text = re.sub(r"[\s、，,。；;：:（）()“”\"]", "", text)
    return {text[i:i + 2] for i in range(len(text) - 1)}


@dataclass(frozen=True)
class Paragraph:
    chunk_id: str
    opening: frozenset[str]  # bigrams of its first OPENING_CHARS characters
    text: str


def criminal_law_paragraphs(payloads: list[dict]) -> list[Paragraph]:
    """Paragraphs of the chunks whose law is a criminal law (title ending in 刑法)."""
    out = []
    for p in payloads:
        if not str(p.get("title", "")).endswith("刑法"):
            continue
        for line in p["text"].splitlines():
            body = _ARTICLE_HEAD.sub("", line).strip()
            if len(body) >= 4:
                out.append(Paragraph(p["chunk_id"], frozenset(_bigrams(body[:OPENING_CHARS])), body))
    return out


def score(charge: str, para: Paragraph) -> float:
    """How surely this paragraph defines the charge, in three tiers:
    3 - it names the crime it defines (...是受贿罪 / 为受贿罪);
    2-2.9 - its opening quotes the charge: earlier is better (故意伤害他人身体的 at 0 beats a list of
        crimes that mentions it later), then the larger share of the opening clause it fills (盗窃公私财物
        over 盗窃、抢夺枪支、弹药、爆炸物);
    0-1 - the share of the charge's character bigrams its opening holds (伪造、倒卖伪造的有价票证 against
        伪造或者倒卖伪造的车票...有价票证), for charge names that paraphrase the article."""
    if f"是{charge}罪" in para.text or f"为{charge}罪" in para.text:
        return 3.0
    pos = para.text.find(charge, 0, OPENING_CHARS + len(charge))
    if pos >= 0:
        clause = len(re.split(r"[，,。；;：:]", para.text[pos:], maxsplit=1)[0]) + pos
        return 2.0 + 0.5 / (1 + pos) + 0.4 * len(charge) / max(clause, len(charge))
    grams = _bigrams(charge)
    return len(grams & para.opening) / len(grams) if grams else 0.0


def charge_chunk_ids(question: str, paragraphs: list[Paragraph] | ChargeIndex) -> list[str]:
    """The best-scoring chunk for each named charge, in the order the charges are named. With a ChargeIndex,
    only the paragraphs that can reach MIN_SCORE are scored (the same choice, ~1,500 fewer calls a charge)."""
    out: list[str] = []
    for charge in named_charges(question):
        pool = paragraphs.candidates(charge) if isinstance(paragraphs, ChargeIndex) else paragraphs
        best = max(pool, key=lambda p: score(charge, p), default=None)
        if best is not None and score(charge, best) >= MIN_SCORE and best.chunk_id not in out:
            out.append(best.chunk_id)
    return out


@dataclass(frozen=True)
class ChargeIndex:
    paragraphs: list[Paragraph]
    payloads: dict[str, dict]  # chunk id -> payload, for the chunks the paragraphs belong to
    by_bigram: dict[str, list[int]]  # opening bigram -> the paragraphs (positions) whose opening holds it
    joined: str  # every paragraph's text, "\n" after each: one substring search finds the charge anywhere
    starts: list[int]  # where each paragraph begins in `joined`

    def candidates(self, charge: str) -> list[Paragraph]:
        """The paragraphs, in order, that can score MIN_SCORE or more: their text holds the charge (tiers 2
        and 3 need it), or their opening holds MIN_SCORE of its bigrams. A scan of ~1,500 took ~15 ms."""
        grams = _bigrams(charge)
        hits = Counter(i for g in grams for i in self.by_bigram.get(g, ()))
        picked = {i for i, n in hits.items() if grams and n / len(grams) >= MIN_SCORE}
        at = self.joined.find(charge)
        while at >= 0:
            picked.add(bisect_right(self.starts, at) - 1)
            at = self.joined.find(charge, at + 1)
        return [self.paragraphs[i] for i in sorted(picked)]


def build_charge_index(payloads: list[dict]) -> ChargeIndex:
    paragraphs = criminal_law_paragraphs(payloads)
    ids = {p.chunk_id for p in paragraphs}
    by_bigram: dict[str, list[int]] = {}
    for i, para in enumerate(paragraphs):
        for g in para.opening:
            by_bigram.setdefault(g, []).append(i)
    starts = list(accumulate((len(p.text) + 1 for p in paragraphs[:-1]), initial=0)) if paragraphs else []
    return ChargeIndex(paragraphs, {p["chunk_id"]: p for p in payloads if p["chunk_id"] in ids}, by_bigram,
                       "".join(p.text + "\n" for p in paragraphs), starts)


def charge_index(store, collection: str) -> ChargeIndex:
    """The collection's criminal-law paragraphs. The store owns the index and drops it when a document of
    the collection is replaced or deleted, so an amended 刑法 answers from its new text at once."""
    return store.derived(collection, "charges", lambda: build_charge_index(store.all_payloads(collection)))
