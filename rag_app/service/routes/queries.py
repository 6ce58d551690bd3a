"""The ledger's queries (/v1/queries, one query with its stages and quality), users' feedback on an
answer, the review list, and the answer text this server kept."""
from __future__ import annotations

from fastapi import APIRouter, HTTPException, Query

from rag_app.core.money import usd_json
from rag_app.service.deps import Authed, Svc
from rag_app.service.inputs import FeedbackRequest, Timestamp
from tracing.ledger import stage_json

router = APIRouter(dependencies=Authed)
MAX_INT = 2**62  # SQLite integers are signed 64-bit; larger offsets were a 500


@router.get("/v1/queries")
def queries(svc: Svc, variant: str | None = None, status: str | None = None, since: Timestamp | None = None,
            until: Timestamp | None = None, experiment: str | None = None,
            limit: int = Query(50, ge=-MAX_INT, le=MAX_INT), offset: int = Query(0, ge=-MAX_INT, le=MAX_INT)):
    limit, offset = min(max(limit, 1), 500), max(offset, 0)  # a page is 1-500 rows; say which was served
    total, rows = svc.read(lambda L: L.list_queries(variant=variant, status=status, since=since, until=until,
                                                    experiment=experiment, limit=limit, offset=offset))
    return {"total": total, "limit": limit, "offset": offset, "queries": [query_json(r) for r in rows]}


@router.get("/v1/queries/{query_id}")
def query(query_id: str, svc: Svc):
    row, stages, quality, feedback, judged = svc.read(lambda L: (L.query(query_id), L.stage_rows(query_id),
                                                                 L.quality(query_id), L.feedback(query_id),
                                                                 L.judge(query_id)))
    if row is None:
        raise HTTPException(404, f"no query {query_id[:80]!r} in the ledger")  # never echo a long input whole
    if quality is not None:  # the judge's grades beside the local signals; its cost is evaluation spend
        quality = {**quality, "judge": judged}
    return {**query_json(row), "quality": quality, "feedback": feedback,
            "stages": [stage_json(r) for r in stages]}


@router.get("/v1/feedback")
def review(svc: Svc, score: int = Query(-1, ge=-1, le=1), limit: int = Query(50, ge=1, le=500)):
    """The review list: the latest answers users marked wrong (score -1), unsure (0) or right (1)."""
    return {"score": score, "answers": svc.read(lambda L: L.review(score, limit))}


@router.get("/v1/review")
def to_review(svc: Svc, grounded_below: float = Query(0.5, ge=0, le=1), limit: int = Query(50, ge=1, le=500)):
    """What a reviewer should read first: answers users marked wrong or grounded below
    `grounded_below`, newest first, each with why."""
    return {"grounded_below": grounded_below, "answers": svc.read(lambda L: L.to_review(grounded_below, limit))}


@router.post("/v1/queries/{query_id}/feedback")
def query_feedback(query_id: str, req: FeedbackRequest, svc: Svc):
    """A user's word on an answer (-1 wrong, 0 unsure, 1 right, a comment): kept in the ledger beside
    its cost and quality; the same user's second word replaces the first."""
    from rag_app.models.attempts import utcnow

    if svc.read(lambda L: L.query(query_id)) is None:
        raise HTTPException(404, f"no query {query_id[:80]!r} in the ledger")
    return svc.read(lambda L: L.add_feedback(query_id, req.user_id or "", req.score, req.comment, utcnow()),
                    flush=False)


@router.get("/v1/queries/{query_id}/answer")
def query_answer(query_id: str, svc: Svc):
    """The answer, citations and passages of one of the last answers this server gave (kept in memory)."""
    kept = svc.answers.get(query_id)
    if kept is None:
        raise HTTPException(404, f"no answer text kept for {query_id[:80]!r}: this server keeps the last "
                                 f"{svc.answers.limit} answers it gave, in memory (not `rag ask`'s, not "
                                 f"across restarts); its costs are at /v1/queries/{query_id[:80]}")
    return kept


def query_json(r: dict) -> dict:
    return {"query_id": r["query_id"], "question": r["question"], "variant": r["variant"],
            "experiment": r["experiment"], "mode": r["mode"], "status": r["status"], "started_at": r["started_at"],
            "latency_ms": r["latency_ms"], "input_tokens": r["input_tokens"], "output_tokens": r["output_tokens"],
            "cost_usd": usd_json(r["cost_nano_usd"]), "shadow_cost_usd": usd_json(r["shadow_cost_nano_usd"]),
            "priced_cost_usd": usd_json(r["priced_cost_nano_usd"]), "unpriced_rows": r["unpriced_rows"],
            "estimated_rows": r["estimated_rows"], "output_at_risk_tokens": r["output_at_risk_tokens"],
            "retries": r["retries"], "timeouts": r["timeouts"]}
