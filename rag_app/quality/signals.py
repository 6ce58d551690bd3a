"""Quality signals of one answer, from nothing but the answer and the passages sent (no LLM, ~1 ms).

- claims: each sentence of the answer, checked against the passages (rag_app/quality/claims.py):
  `{"text", "supported", "passage", "why"}`; a refusal sentence is listed with `supported` null.
- refusal: the answer says only that the passages do not answer the question ("根据检索到的条文无法确定。",
  "The passages do not say ..."): an honest refusal is not an ungrounded claim; its groundedness is null.
- groundedness in [0, 1]: the share of the answer's claims (refusals left out) supported after every
  check: found in a passage it cites (or any, citing none), its citations valid, its modality, negation
  and numbers those of the passage sentences it matches. Null when the answer makes no claim. An
  extractive answer is grounded by construction (1.0).
- invalid_citations: citation marks `[n]` that point at no passage sent, laws (《...》) and articles
  (第N条, Chinese or Arabic numerals) that appear in none of the passages sent nor their labels.
- retrieval_confidence in [0, 1]: when the question names laws or articles, the share of them found
  in the passages sent, averaged with the top passage's score margin over the second; otherwise the
  margin alone. 0 when nothing was sent.

Measured on a labelled set of answers built from the corpus (bench/quality_detector.py, docs/quality.md).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rag_app.quality.claims import CITE, LAW, REFUSAL_WHY, Claim, Passage, check_claims
from rag_app.text import find_article_refs

if TYPE_CHECKING:
    from rag_app.core import Answer

PRC = "中华人民共和国"


@dataclass(frozen=True)
class Quality:
    groundedness: float | None
    invalid_citations: list[dict[str, str]] = field(default_factory=list)
    retrieval_confidence: float | None = None
    refusal: bool = False
    claims: tuple[Claim, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"groundedness": self.groundedness, "invalid_citations": list(self.invalid_citations),
                "retrieval_confidence": self.retrieval_confidence, "refusal": self.refusal,
                "claims": [c.as_json() for c in self.claims]}


def _passages(passages: Sequence[str], labels: Sequence[str]) -> list[Passage]:
    return [Passage(p, labels[i] if i < len(labels) else "") for i, p in enumerate(passages)]


def grounded_share(claims: Sequence[Claim]) -> float | None:
    """The share of claims supported, refusals left out; None when there is no claim."""
    checked = [c for c in claims if c.supported is not None]
    if not checked:
        return None
    return round(sum(c.supported is True for c in checked) / len(checked), 4)


def is_refusal_answer(claims: Sequence[Claim]) -> bool:
    """The answer says the passages do not answer, and claims nothing (advice to consult a lawyer beside
    it is neither)."""
    return any(c.why == REFUSAL_WHY for c in claims) and all(c.supported is None for c in claims)


def groundedness(answer: str, passages: Sequence[str], labels: Sequence[str] = ()) -> float | None:
    return grounded_share(check_claims(answer, _passages(passages, labels)))


def _law_known(name: str, passages_text: str) -> bool:
    short = name.removeprefix(PRC)
    return name in passages_text or short in passages_text


def invalid_citations(answer: str, passages: Sequence[str], titles: Sequence[str] = (),
                      labels: Sequence[str] = ()) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for n in sorted({int(n) for n in CITE.findall(answer)}):
        if not 1 <= n <= len(passages):
            out.append({"citation": f"[{n}]", "why": f"no passage {n} was sent ({len(passages)} were)"})
    text = "\n".join([*passages, *titles, *labels])  # an article shown in a label was sent
    for name in dict.fromkeys(LAW.findall(answer)):
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
    named = [("law", n) for n in dict.fromkeys(LAW.findall(question))] + \
            [("article", k) for k in dict.fromkeys(find_article_refs(question))]
    if not named:
        return round(margin, 4)
    articles = set(find_article_refs(text))
    found = sum(_law_known(v, text) if kind == "law" else v in articles for kind, v in named)
    return round((margin + found / len(named)) / 2, 4)


def score_answer(question: str, answer: str, mode: str, passages: Sequence[str],
                 scores: Sequence[float | None] = (), titles: Sequence[str] = (),
                 labels: Sequence[str] = ()) -> Quality:
    """Every signal of one answer. `labels`: each passage's label as the model saw it (《公司法》第五十七条)."""
    confidence = retrieval_confidence(question, passages, scores)
    if mode == "extractive":  # the passages' own text: grounded by construction, nothing to check
        return Quality(1.0, invalid_citations(answer, passages, titles, labels), confidence)
    claims = tuple(check_claims(answer, _passages(passages, labels), titles))
    return Quality(grounded_share(claims), invalid_citations(answer, passages, titles, labels), confidence,
                   is_refusal_answer(claims), claims)


def quality_of(answer: Answer) -> Quality:
    """An Answer's signals (rag_app.core.types.Answer), from the passages it was given."""
    from rag_app.query import citation_for, passage_label

    ctx = answer.contexts
    return score_answer(answer.question, answer.text, answer.mode, [sc.chunk.text for sc in ctx],
                        [sc.rerank_score if sc.rerank_score is not None else sc.score for sc in ctx],
                        titles=[citation_for(sc).law for sc in ctx], labels=[passage_label(sc) for sc in ctx])
