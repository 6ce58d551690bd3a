"""Quality signals of one answer, from nothing but the answer and the passages sent (no LLM, ~1 ms).

- groundedness in [0, 1]: the share of the answer's sentences (claims) supported by the passages sent.
  A sentence is supported when most of its character n-grams (bigrams for Chinese, 4-grams otherwise,
  punctuation and citation marks left out) are found in a passage it cites, or, citing none, in any
  passage sent. A sentence citing only passages never sent is unsupported whatever it says. An
  extractive answer is grounded by construction (1.0).
- invalid_citations: citation marks `[n]` that point at no passage sent, laws (《...》) and articles
  (第N条, Chinese or Arabic numerals) that appear in none of the passages sent.
- retrieval_confidence in [0, 1]: when the question names laws or articles, the share of them found
  in the passages sent, averaged with the top passage's score margin over the second; otherwise the
  margin alone. 0 when nothing was sent.

Calibrated on constructed answers (tests/unit/test_quality.py): a sentence quoted from the passage it
cites scores 1.0; a paraphrase that keeps the passage's terms >= 0.5; an invented claim citing a
passage never sent 0.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from rag_app.text.legal_numbers import find_article_refs

SUPPORTED_AT = 0.5  # share of a sentence's n-grams found in a passage
MIN_GRAMS = 3  # shorter fragments ("综上。") are not claims
_CITE = re.compile(r"\[(\d{1,3})\]")
_SENTENCE = re.compile(r"(?<=[。！？!?；;\n])|(?<=[.])\s+")
_NOT_TEXT = re.compile(r"[\W_]+", re.UNICODE)
_CJK = re.compile(r"[\u4e00-\u9fff]")
_LAW = re.compile(r"《([^《》]{2,40})》")
_PRC = "中华人民共和国"


@dataclass(frozen=True)
class Quality:
    groundedness: float | None
    invalid_citations: list[dict] = field(default_factory=list)
    retrieval_confidence: float | None = None

    def as_json(self) -> dict:
        return {"groundedness": self.groundedness, "invalid_citations": list(self.invalid_citations),
                "retrieval_confidence": self.retrieval_confidence}


def _grams(text: str) -> set[str]:
    flat = _NOT_TEXT.sub("", _CITE.sub("", text)).lower()
    n = 2 if len(_CJK.findall(flat)) * 2 >= len(flat) else 4
    return {flat[i:i + n] for i in range(len(flat) - n + 1)}


def sentences(answer: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(answer) if s and s.strip()]


def support(sentence: str, passages: Sequence[str]) -> float:
    """The largest share of the sentence's n-grams one of the passages holds."""
    grams = _grams(sentence)
    if not grams:
        return 1.0
    best = 0.0
    for p in passages:
        best = max(best, len(grams & _grams(p)) / len(grams))
    return best


def groundedness(answer: str, passages: Sequence[str]) -> float | None:
    claims = [s for s in sentences(answer) if len(_grams(s)) >= MIN_GRAMS]
    if not claims:
        return None
    supported = 0
    for s in claims:
        cited = [int(n) for n in _CITE.findall(s)]
        pool = [passages[n - 1] for n in cited if 1 <= n <= len(passages)] if cited else list(passages)
        supported += bool(pool) and support(s, pool) >= SUPPORTED_AT
    return round(supported / len(claims), 4)


def _law_known(name: str, passages_text: str) -> bool:
    short = name.removeprefix(_PRC)
    return name in passages_text or short in passages_text


def invalid_citations(answer: str, passages: Sequence[str], titles: Sequence[str] = ()) -> list[dict]:
    out: list[dict] = []
    for n in sorted({int(n) for n in _CITE.findall(answer)}):
        if not 1 <= n <= len(passages):
            out.append({"citation": f"[{n}]", "why": f"no passage {n} was sent ({len(passages)} were)"})
    text = "\n".join([*passages, *titles])
    for name in dict.fromkeys(_LAW.findall(answer)):
        if not _law_known(name, text):
            out.append({"citation": f"《{name}》", "why": "a law named in none of the passages sent"})
    sent_articles = set(find_article_refs(text))
    for key in dict.fromkeys(find_article_refs(answer)):
        if key not in sent_articles:
            out.append({"citation": f"article {key}", "why": "an article in none of the passages sent"})
    return out


def retrieval_confidence(question: str, passages: Sequence[str], scores: Sequence[float | None]) -> float | None:
    if not passages:
        return 0.0
    known = [s for s in scores if s is not None]
    margin = 1.0 if len(known) < 2 else max(0.0, min(1.0, (known[0] - known[1]) / max(abs(known[0]), 1e-9)))
    text = "\n".join(passages)
    named = [("law", n) for n in dict.fromkeys(_LAW.findall(question))] + \
            [("article", k) for k in dict.fromkeys(find_article_refs(question))]
    if not named:
        return round(margin, 4)
    articles = set(find_article_refs(text))
    found = sum(_law_known(v, text) if kind == "law" else v in articles for kind, v in named)
    return round((margin + found / len(named)) / 2, 4)


def score_answer(question: str, answer: str, mode: str, passages: Sequence[str],
                 scores: Sequence[float | None] = (), titles: Sequence[str] = ()) -> Quality:
    grounded = 1.0 if mode == "extractive" else groundedness(answer, passages)
    return Quality(grounded, invalid_citations(answer, passages, titles),
                   retrieval_confidence(question, passages, scores))


def quality_of(answer) -> Quality:
    """An Answer's signals (rag_app.core.types.Answer), from the passages it was given."""
    from rag_app.query.answer import citation_for

    ctx = answer.contexts
    return score_answer(answer.question, answer.text, answer.mode, [sc.chunk.text for sc in ctx],
                        [sc.rerank_score if sc.rerank_score is not None else sc.score for sc in ctx],
                        titles=[citation_for(sc).law for sc in ctx])
