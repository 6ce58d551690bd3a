"""The hit rule, and the translation of chunk rankings into ranx runs over gold ids.

A retrieved chunk hits a gold span when it is in the same document and covers >= 50% of the
gold span's characters. ranx ranks *items*; we rank gold ids: walking the chunk ranking, a chunk
that hits not-yet-found gold spans contributes those gold ids at its rank, any other chunk a
filler id, so a cut-off at k keeps its meaning. (A chunk hitting two new golds adds one extra
entry, which can only push later ranks down: the approximation is never optimistic. We count
how often it happens.)
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rag_app.evaluation.qa import Gold, Question

MIN_COVERAGE = 0.5


def covers(doc: str, start: int, end: int, gold: Gold, min_coverage: float = MIN_COVERAGE) -> bool:
    if doc != gold.doc:
        return False
    overlap = min(end, gold.char_end) - max(start, gold.char_start)
    return overlap > 0 and overlap >= min_coverage * (gold.char_end - gold.char_start)


@dataclass(frozen=True)
class Ranked:
    doc: str
    char_start: int
    char_end: int
    tokens: int
    score: float
    # The chunk's text (an exact slice of the document), so a budget can cut the chunk that would cross
    # it where the context packer does; None (old runs files): that chunk is not counted.
    text: str | None = field(default=None, compare=False, repr=False)


def gold_id(q: Question, i: int) -> str:
    return f"{q.id}#g{i}"


def ranking_to_run(q: Question, ranking: list[Ranked]) -> tuple[dict[str, float], int]:
    """({item id: score}, number of chunks that hit more than one new gold)."""
    found: set[int] = set()
    run: dict[str, float] = {}
    multi = 0
    n = len(ranking) + len(q.gold) + 1
    pos = 0
    for rank, r in enumerate(ranking):
        new = [i for i, g in enumerate(q.gold) if i not in found and covers(r.doc, r.char_start, r.char_end, g)]
        multi += len(new) > 1
        for i in new or [None]:  # type: ignore[list-item]  # None: a miss at this rank
            run[gold_id(q, i) if i is not None else f"{q.id}#miss{rank}"] = float(n - pos)
            pos += 1
        found.update(new)
    return run, multi


def qrels_for(q: Question) -> dict[str, int]:
    return {gold_id(q, i): 1 for i in range(len(q.gold))}
