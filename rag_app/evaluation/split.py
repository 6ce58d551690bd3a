"""A fixed tune/validate split of a QA file, stratified by task, decided by a hash of each id.

Rule (SPLIT_RULE, versioned): within each task, questions are ordered by
sha256("rag-eval-split/1|" + id); the first floor(n/2) of that order are `validate`, the rest
`tune`. So every task is split in half (validate gets the smaller half when n is odd), the split
never depends on file order, and the same id always lands on the same side while its task's
membership is unchanged. Adding or removing questions of a task may move others of that task:
pin a QA file (the eval output records its path and the rule).

Tune levers and defaults on `tune` only; a change becomes the default only if its gain on
`validate` has a paired 95% interval above zero.
"""
from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

SPLITS = ("tune", "validate")
SPLIT_RULE = "per task: sort by sha256('rag-eval-split/1|'+id); first floor(n/2) validate, rest tune"
_SALT = "rag-eval-split/1|"

class _Labelled(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def task(self) -> str: ...


Q = TypeVar("Q", bound=_Labelled)


def split_key(qid: str) -> str:
    return hashlib.sha256((_SALT + qid).encode("utf-8")).hexdigest()


def assign_splits(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """{id: 'tune' | 'validate'} for (id, task) pairs. Pure; duplicate ids are an error."""
    by_task: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    for qid, task in items:
        if qid in seen:
            raise ValueError(f"duplicate question id {qid!r}: ids must be unique to split by id")
        seen.add(qid)
        by_task[task].append(qid)
    out: dict[str, str] = {}
    for ids in by_task.values():
        ordered = sorted(ids, key=split_key)
        half = len(ordered) // 2
        out.update((qid, "validate" if i < half else "tune") for i, qid in enumerate(ordered))
    return out


def select_split(questions: Sequence[Q], split: str | None) -> list[Q]:
    """The questions (objects with .id and .task) of one split, in file order; all when split is None."""
    if split is None:
        return list(questions)
    if split not in SPLITS:
        raise ValueError(f"--split must be one of {', '.join(SPLITS)}, not {split!r}")
    side = assign_splits((q.id, q.task) for q in questions)
    return [q for q in questions if side[q.id] == split]
