"""Per-question recall: at a rank cut-off, and within a context-token budget.

Budget rule: chunks are taken in rank order while the running total of their tokens stays within
the budget; the chunk that would cross the budget is cut to the tokens left (its first N tokens, as
rag_app/query/context.py packs it into the prompt) and nothing after it counts (no skipping ahead to
smaller chunks). This is what a prompt of that size holds. A ranking without chunk texts (runs
files from before 0.3.0) cannot be cut: there the crossing chunk is not counted. Per question,
recall is the share of its gold spans covered (hits.covers: same doc, >= 50% of the span).
"""
from __future__ import annotations

from collections.abc import Sequence

from dataclasses import replace

from rag_app.evaluation.hits import Ranked, covers
from rag_app.evaluation.qa import Question
from rag_app.text import count_tokens, cut_to_tokens


def within_budget(ranking: Sequence[Ranked], budget: int) -> list[Ranked]:
    taken, used = [], 0
    for r in ranking:
        if used + r.tokens > budget:
            cut = cut_to_tokens(r.text, budget - used) if r.text is not None and budget > used else ""
            if cut and count_tokens(cut) <= budget - used:
                taken.append(replace(r, char_end=r.char_start + len(cut), tokens=count_tokens(cut), text=cut))
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
