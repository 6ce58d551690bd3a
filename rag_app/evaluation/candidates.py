"""Where the misses are: for each gold span, whether the pipeline put it within the context budget, had
it among the candidates its fusion saw but ranked it too low (a ranking miss), or never had it (a
candidate miss); and how much of the gold each candidate view reaches at a depth.

Shares are per question, each gold span weighing 1/len(gold) as in recall, so found + ranking misses +
candidate misses = 1 per question and `found` averages to `rag eval`'s recall within the same budget.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from rag_app.evaluation.budget import recall_of, within_budget
from rag_app.evaluation.hits import Ranked, covers
from rag_app.evaluation.qa import Question
from rag_app.evaluation.stats import mean_ci

OUTCOMES = ("found", "ranking_miss", "candidate_miss")


@dataclass(frozen=True)
class MissSplit:
    """One question's shares (they sum to 1)."""

    found: float
    ranking_miss: float
    candidate_miss: float


def split_misses(q: Question, ranking: Sequence[Ranked], candidates: Iterable[Ranked], budget: int) -> MissSplit:
    """Each gold span: found within `budget` tokens of `ranking` (the product's budget rule), else a
    ranking miss when a chunk of `candidates` (what the ranker saw) covers it, else a candidate miss."""
    taken = within_budget(ranking, budget)
    pool = list(candidates)
    found = ranking_miss = candidate_miss = 0
    for g in q.gold:
        if any(covers(r.doc, r.char_start, r.char_end, g) for r in taken):
            found += 1
        elif any(covers(r.doc, r.char_start, r.char_end, g) for r in pool):
            ranking_miss += 1
        else:
            candidate_miss += 1
    n = len(q.gold)
    return MissSplit(found / n, ranking_miss / n, candidate_miss / n)


def by_task(questions: Sequence[Question]) -> dict[str, list[int]]:
    """Question indexes per task and under `all`."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, q in enumerate(questions):
        groups[q.task].append(i)
        groups["all"].append(i)
    return groups


def miss_table(questions: Sequence[Question], splits: Sequence[MissSplit]) -> list[dict]:
    """Rows per task and `all`: n, and for each outcome its mean share with a 95% bootstrap interval."""
    groups = by_task(questions)
    rows = []
    for task in sorted(groups, key=lambda t: (t == "all", t)):
        idx = groups[task]
        rows.append({"task": task, "n": len(idx),
                     **{o: mean_ci([getattr(splits[i], o) for i in idx]) for o in OUTCOMES}})
    return rows


def view_recall(questions: Sequence[Question], views: Sequence[dict[str, list[Ranked]]],
                depths: Sequence[int], whole: Collection[str] = ()) -> list[dict]:
    """Rows per task and `all` with, for each view and depth, mean recall of its top-`depth` chunks
    (`name@depth`); the views named in `whole` (sets, such as a union of views) uncut (`name`).
    `views[i]` is question i's {view name: its ranking}."""
    names = list(dict.fromkeys(n for v in views for n in v))
    groups = by_task(questions)
    rows = []
    for task in sorted(groups, key=lambda t: (t == "all", t)):
        idx = groups[task]
        row: dict = {"task": task, "n": len(idx)}
        for name in names:
            if name in whole:
                row[name] = round(sum(recall_of(questions[i], views[i].get(name, [])) for i in idx) / len(idx), 3)
                continue
            for d in depths:
                row[f"{name}@{d}"] = round(sum(recall_of(questions[i], views[i].get(name, [])[:d]) for i in idx)
                                           / len(idx), 3)
        rows.append(row)
    return rows
