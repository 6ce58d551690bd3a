"""Dynamic merge: pack consecutive pieces toward a token target.

Rules, in order: never cross a 编/章 boundary; tables stand alone; never exceed the hard max; a
piece that opens with a connective joins its predecessor; join while the target max holds; a
fragment under the minimum joins its neighbour when the hard max allows.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Piece:
    start: int
    end: int
    boundary: tuple[str, ...]
    unit_index: int
    standalone: bool = False  # tables
    glue_prev: bool = False  # opens with a connective: stays with what it refers to


@dataclass(frozen=True)
class Budget:
    """Token bounds for one chunk. There is no lower target: `pack` joins while `target_max` holds, and only
    `min_tokens` keeps a fragment from standing alone."""
    target_max: int = 250
    hard_max: int = 512
    min_tokens: int = 40


def pack(pieces: list[Piece], span_tokens: Callable[[int, int], int], budget: Budget) -> list[list[Piece]]:
    groups: list[list[Piece]] = []
    cur: list[Piece] = []
    cur_tokens = 0
    for p in pieces:
        if not cur:
            cur, cur_tokens = [p], span_tokens(p.start, p.end)
            continue
        joinable = (not p.standalone and not cur[0].standalone and p.boundary == cur[-1].boundary)
        if joinable:
            combined = span_tokens(cur[0].start, p.end)
            own = span_tokens(p.start, p.end)
            if combined <= budget.hard_max and (
                p.glue_prev
                or combined <= budget.target_max
                or own < budget.min_tokens
                or (cur_tokens < budget.min_tokens)
            ):
                cur.append(p)
                cur_tokens = combined
                continue
        groups.append(cur)
        cur, cur_tokens = [p], span_tokens(p.start, p.end)
    if cur:
        groups.append(cur)
    return groups
