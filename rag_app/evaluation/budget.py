"""Per-question recall: at a rank cut-off, and within a context-token budget.

Budget rule: chunks are taken in rank order while the running total of their tokens stays within
the budget; the chunk that would cross the budget is NOT counted, and nothing after it is (no
skipping ahead to smaller chunks). This is what a prompt of that size can hold. Per question,
recall is the share of its gold spans covered (hits.covers: same doc, >= 50% of the span).
"""
from __future__ import annotations

from collections.abc import Sequence

from rag_app.evaluation.hits import Ranked, covers
from rag_app.evaluation.qa import Question


def within_budget(ranking: Sequence[Ranked], budget: int) -> list[Ranked]:
    taken, used = [], 0
    for r in ranking:
        if used + r.tokens > budget:
            break
        taken.append(r)
        used += r.tokens
    return taken


def recall_of(q: Question, chunks: Sequence[Ranked]) -> float:
    found = sum(any(covers(r.doc, r.char_start, r.char_end, g) for r in chunks) for g in q.gold)
    return found / len(q.gold)


def recall_at(q: Question, ranking: Sequence[Ranked], k: int) -> float:
    return recall_of(q, ranking[:k])


def recall_within(q: Question, ranking: Sequence[Ranked], budget: int) -> float:
    return recall_of(q, within_budget(ranking, budget))


def tokens_within(ranking: Sequence[Ranked], budget: int) -> int:
    return sum(r.tokens for r in within_budget(ranking, budget))
