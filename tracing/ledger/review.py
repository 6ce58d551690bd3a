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
from typing import Any

from sqlalchemy import Connection, and_, func, or_, select, union
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


def to_review(db: Connection, grounded_below: float, judge_below: float, limit: int, refusals: bool = False) -> list[dict]:
    """The review list (or, `refusals`, the answers that refused), newest first, each with why."""
    t, q, f = queries, query_quality, query_feedback
    chosen: Select | CompoundSelect = _refusals() if refusals else _listed(grounded_below, judge_below)
    ids = chosen.subquery("review_ids")
    page = db.execute(select(t.c.query_id, t.c.question, t.c.variant, t.c.started_at)
                      .join_from(ids, t, t.c.query_id == ids.c.query_id)
                      .order_by(t.c.started_at.desc(), t.c.query_id).limit(limit)).mappings().all()
    wanted = [r["query_id"] for r in page]
    signals: dict[str, dict[str, Any]] = {qid: {} for qid in wanted}
    if wanted:
        for qid, source, metric, value, detail in db.execute(
                select(q.c.query_id, q.c.source, q.c.metric, q.c.value, q.c.detail)
                .where(q.c.query_id.in_(wanted), or_(*[and_(q.c.source == s, q.c.metric == m) for s, m in _SHOWN]))):
            signals[qid][f"{source}:{metric}"] = (value, json.loads(detail) if detail else None)
        said: dict[str, list] = {qid: [] for qid in wanted}
        for qid, score, comment in db.execute(select(f.c.query_id, f.c.score, f.c.comment)
                                              .where(f.c.query_id.in_(wanted)).order_by(f.c.recorded_at)):
            said[qid].append((score, comment))
    out = []
    for r in page:
        s = signals[r["query_id"]]
        grounded = s.get("local:groundedness", (None, None))[0]
        bad = s.get("local:invalid_citations", (0, None))
        faith = s.get("judge:faithfulness", (None, None))[0]
        claims = s.get("local:claims", (None, None))[1] or []
        wrong = [c for score, c in said[r["query_id"]] if score == -1]
        why = (["marked_wrong"] if wrong else []) + \
              (["low_grounded"] if grounded is not None and grounded <= grounded_below else []) + \
              (["invalid_citation"] if bad[0] else []) + \
              (["judge_unfaithful"] if faith is not None and faith <= judge_below else [])
        if refusals:
            why = ["refusal", *why]
        out.append({**r, "groundedness": grounded, "judge_faithfulness": faith, "marked_wrong": len(wrong),
                    "comment": next((c for c in reversed(wrong) if c), None), "why": why,
                    "claims": [c for c in claims if c.get("supported") is False],
                    "invalid_citations": bad[1] or []})
    return out


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
