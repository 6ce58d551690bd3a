"""What a reviewer reads first, and whether the judge agrees with people: reads over query_quality and
query_feedback.

The review list holds an answer when any signal says it may be wrong (the rule in words:
rag_app/quality/review.py); each entry says which (`why`) and shows the claims that were not supported
and the citations that were not sent. Thresholds are inclusive. Refusals are not ungrounded: they are a
list of their own (`refusals`).

Judge-feedback agreement: for each answer both graded by the judge (faithfulness) and rated by users
(their scores' sum: above 0 right, below 0 wrong; unsure and ties left out), whether the judge called
it right (faithfulness above the cut) as users did; the share agreeing and Cohen's kappa (agreement
beyond what the two raters' base rates give by chance; scikit-learn's `cohen_kappa_score`).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, RowMapping, and_, func, or_, select, union
from sqlalchemy.sql import CompoundSelect, Select

from tracing.ledger.rollups import number
from tracing.ledger.schema import queries, query_feedback, query_quality

_SHOWN = (("local", "groundedness"), ("local", "invalid_citations"), ("local", "claims"), ("local", "refusal"),
          ("judge", "faithfulness"))


def _listed(grounded_below: float, judge_below: float) -> CompoundSelect:
    q, f = query_quality, query_feedback
    signals = select(q.c.query_id).where(or_(
        and_(q.c.source == "local", q.c.metric == "groundedness", q.c.value <= grounded_below),
        and_(q.c.source == "local", q.c.metric == "invalid_citations", q.c.value > 0),
        and_(q.c.source == "judge", q.c.metric == "faithfulness", q.c.value <= judge_below)))
    return union(signals, select(f.c.query_id).where(f.c.score == -1))


def _refusals() -> Select:
    q = query_quality
    return select(q.c.query_id).where(q.c.source == "local", q.c.metric == "refusal", q.c.value > 0)


def to_review(db: Connection, grounded_below: float, judge_below: float, limit: int, refusals: bool = False) -> list[dict[str, Any]]:
    """The review list (or, `refusals`, the answers that refused), newest first, each with why."""
    t = queries
    chosen: Select | CompoundSelect = _refusals() if refusals else _listed(grounded_below, judge_below)
    ids = chosen.subquery("review_ids")
    page = db.execute(select(t.c.query_id, t.c.question, t.c.variant, t.c.started_at)
                      .join_from(ids, t, t.c.query_id == ids.c.query_id)
                      .order_by(t.c.started_at.desc(), t.c.query_id).limit(limit)).mappings().all()
    wanted = [r["query_id"] for r in page]
    signals, said = _signals(db, wanted), _feedback(db, wanted)
    cuts = _Cuts(grounded_below, judge_below)
    return [_entry(r, _Seen.of(signals[r["query_id"]], said[r["query_id"]]), cuts, refusals) for r in page]


def _entry(r: RowMapping, seen: _Seen, cuts: _Cuts, refusals: bool) -> dict[str, Any]:
    """One answer of the list: its row, the signals shown, why it is listed, its unsupported claims, the
    last comment of a user who marked it wrong."""
    why = [name for name, applies in REASONS if applies(seen, cuts)]
    return {**r, "groundedness": seen.grounded, "judge_faithfulness": seen.faith, "marked_wrong": len(seen.wrong),
            "comment": next((c for c in reversed(seen.wrong) if c), None),
            "why": ["refusal", *why] if refusals else why,
            "claims": [c for c in seen.claims if c.get("supported") is False],
            "invalid_citations": seen.invalid_detail or []}


def _signals(db: Connection, wanted: list[str]) -> dict[str, dict[str, tuple[Any, Any]]]:
    """Per answer, the shown signals' (value, detail) by "source:metric"."""
    q = query_quality
    signals: dict[str, dict[str, tuple[Any, Any]]] = {qid: {} for qid in wanted}
    if not wanted:
        return signals
    for qid, source, metric, value, detail in db.execute(
            select(q.c.query_id, q.c.source, q.c.metric, q.c.value, q.c.detail)
            .where(q.c.query_id.in_(wanted), or_(*[and_(q.c.source == s, q.c.metric == m) for s, m in _SHOWN]))):
        signals[qid][f"{source}:{metric}"] = (value, json.loads(detail) if detail else None)
    return signals


def _feedback(db: Connection, wanted: list[str]) -> dict[str, list[tuple[int, str | None]]]:
    """Per answer, what users said of it, (score, comment), oldest first."""
    f = query_feedback
    said: dict[str, list[tuple[int, str | None]]] = {qid: [] for qid in wanted}
    if not wanted:
        return said
    for qid, score, comment in db.execute(select(f.c.query_id, f.c.score, f.c.comment)
                                          .where(f.c.query_id.in_(wanted)).order_by(f.c.recorded_at)):
        said[qid].append((score, comment))
    return said


@dataclass(frozen=True)
class _Cuts:
    """The inclusive thresholds of the list: groundedness and the judge's faithfulness at or below them."""

    grounded: float
    judge: float


@dataclass(frozen=True)
class _Seen:
    """One answer's signals as the list reads them, and the comments of the users who marked it wrong."""

    grounded: float | None
    invalid: Any  # invalid_citations' value: how many (0 or none: no row)
    invalid_detail: list[dict[str, Any]] | None
    faith: float | None
    claims: list[dict[str, Any]]
    wrong: list[str | None]

    @classmethod
    def of(cls, s: dict[str, tuple[Any, Any]], said: list[tuple[int, str | None]]) -> _Seen:
        bad = s.get("local:invalid_citations", (0, None))
        return cls(s.get("local:groundedness", (None, None))[0], bad[0], bad[1],
                   s.get("judge:faithfulness", (None, None))[0], s.get("local:claims", (None, None))[1] or [],
                   [c for score, c in said if score == -1])


# -- why an answer is listed, in rag_app/quality/review.py WHY's order: each a name and whether it applies -----

def _marked_wrong(a: _Seen, cut: _Cuts) -> bool:
    return bool(a.wrong)


def _low_grounded(a: _Seen, cut: _Cuts) -> bool:
    return a.grounded is not None and a.grounded <= cut.grounded


def _invalid_citation(a: _Seen, cut: _Cuts) -> bool:
    return bool(a.invalid)


def _judge_unfaithful(a: _Seen, cut: _Cuts) -> bool:
    return a.faith is not None and a.faith <= cut.judge


REASONS: tuple[tuple[str, Callable[[_Seen, _Cuts], bool]], ...] = (
    ("marked_wrong", _marked_wrong), ("low_grounded", _low_grounded), ("invalid_citation", _invalid_citation),
    ("judge_unfaithful", _judge_unfaithful))


def judge_agreement(db: Connection, ids: Select, right_above: float) -> dict | None:
    """How often the judge and users agree on the answers `ids` selects that both graded; None when
    there is none."""
    q, f = query_quality, query_feedback
    rows = db.execute(select(q.c.query_id, q.c.value, func.sum(f.c.score))
                      .join(f, f.c.query_id == q.c.query_id)
                      .where(q.c.query_id.in_(ids), q.c.source == "judge", q.c.metric == "faithfulness",
                             q.c.value.is_not(None), f.c.score != 0)
                      .group_by(q.c.query_id, q.c.value)).all()
    pairs = [(float(number(value)) > right_above, int(number(total)) > 0)
             for _, value, total in rows if int(number(total)) != 0]
    if not pairs:
        return None
    agree = sum(j == u for j, u in pairs)
    return {"answers": len(pairs), "agreeing": agree, "share_agreeing": round(agree / len(pairs), 4),
            "kappa": _kappa([j for j, _ in pairs], [u for _, u in pairs])}


def _kappa(judge: list[bool], users: list[bool]) -> float | None:
    """Cohen's kappa, or None where it is undefined (both raters gave one and the same label throughout)."""
    from sklearn.metrics import cohen_kappa_score

    if len(set(judge) | set(users)) < 2:
        return None
    k = float(cohen_kappa_score(judge, users))
    return None if k != k else round(k, 4)
