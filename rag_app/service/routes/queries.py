"""The ledger's queries (/v1/queries, one query with its stages and quality), users' feedback on an
answer, the review list, and the answer text this server kept."""
from __future__ import annotations

from fastapi import APIRouter, HTTPException, Query, Response

from rag_app.access import Principal
from rag_app.access import check_admin, seen_user, user_for
from rag_app.core import usd_json
from rag_app.quality import JUDGE_REVIEW_AT, REVIEW_AT
from rag_app.service.deps import Authed, Caller, ServiceState, Svc
from rag_app.service.inputs import FeedbackRequest, Timestamp
from tracing.ledger import stage_json

router = APIRouter(dependencies=Authed)
MAX_INT = 2**62  # SQLite integers are signed 64-bit; larger offsets were a 500
MAX_CSV_ROWS = 10_000  # one CSV download of the list; every query: `rag report --format csv`


@router.get("/v1/queries")
def queries(svc: Svc, who: Caller, variant: str | None = None, status: str | None = None, since: Timestamp | None = None,
            until: Timestamp | None = None, experiment: str | None = None,
            limit: int = Query(50, ge=-MAX_INT, le=MAX_INT), offset: int = Query(0, ge=-MAX_INT, le=MAX_INT),
            user: str | None = Query(None, description="only this user's queries"),
            key: str | None = Query(None, description="only the queries of this API key (its name)"),
            marked_wrong: bool = Query(False, description="only answers a user marked wrong"),
            unsupported: bool = Query(False, description="only answers with a claim the passages do not support"),
            refusal: bool = Query(False, description="only answers that refused (the passages did not answer)"),
            invalid_citations: bool = Query(False, description="only answers citing what was not sent"),
            grounded_below: float | None = Query(None, ge=0, le=1, description="only answers grounded below this"),
            format: str = Query("json", pattern="^(json|csv)$", description="json (a page) or csv (every match, "
                                                                              f"newest first, up to {MAX_CSV_ROWS:,})")):
    """The query list, newest first, each query with its cost and its answer's quality (groundedness or
    refusal, invalid citations, users' feedback, the judge's grades), filtered by any of the above. A
    member key sees only its own user's queries, whatever it asks for. `format=csv`: the same columns."""
    if format == "csv":
        limit, offset = MAX_CSV_ROWS, 0
    limit, offset = min(max(limit, 1), 500 if format == "json" else MAX_CSV_ROWS), max(offset, 0)
    quality = {"marked_wrong": marked_wrong, "unsupported": unsupported, "refusal": refusal,
               "invalid_citations": invalid_citations, "grounded_below": grounded_below}
    total, rows = svc.read(lambda L: L.list_queries(variant=variant, status=status, since=since, until=until,
                                                    experiment=experiment, limit=limit, offset=offset,
                                                    user=seen_user(who), user_id=user, key=key, quality=quality))
    listed = [query_json(r) for r in rows]
    if format == "csv":
        return csv_response(listed, total)
    return {"total": total, "limit": limit, "offset": offset, "queries": listed}


def csv_response(rows: list[dict], total: int) -> Response:
    """The list's own columns as CSV (money at full precision, as `rag report --format csv`); the header
    X-Total-Count says how many matched when more did than a file carries."""
    import csv
    import io

    from rag_app.present import plain_row

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else LIST_COLUMNS)  # the JSON's fields, in its order
    w.writeheader()
    w.writerows(plain_row(r) for r in rows)
    return Response(buf.getvalue(), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": 'attachment; filename="queries.csv"',
                             "X-Total-Count": str(total)})


def visible(who: Principal, row: dict | None, query_id: str) -> dict:
    """The query's row when this key may see it; otherwise the same 404 as a query that does not exist
    (a member learns nothing of other users' queries, not even that they exist)."""
    mine = seen_user(who)
    if row is None or (mine is not None and row.get("user_id") != mine):
        raise HTTPException(404, f"no query {query_id[:80]!r} in the ledger")  # never echo a long input whole
    return row


def own_query(svc: ServiceState, who: Principal, query_id: str) -> dict:
    return visible(who, svc.read(lambda L: L.query(query_id)), query_id)


@router.get("/v1/queries/{query_id}")
def query(query_id: str, svc: Svc, who: Caller):
    row, stages, quality, feedback, judged = svc.read(lambda L: (L.query(query_id), L.stage_rows(query_id),
                                                                 L.quality(query_id), L.feedback(query_id),
                                                                 L.judge(query_id)))
    row = visible(who, row, query_id)
    if quality is not None:  # the judge's grades beside the local signals; its cost is evaluation spend
        quality = {**quality, "judge": judged}
    return {**query_json(row), "quality": quality, "feedback": feedback,
            "stages": [stage_json(r) for r in stages]}


@router.get("/v1/feedback")
def review(svc: Svc, who: Caller, score: int = Query(-1, ge=-1, le=1), limit: int = Query(50, ge=1, le=500)):
    """The review list: the latest answers users marked wrong (score -1), unsure (0) or right (1)."""
    check_admin(who, "the review list")
    return {"score": score, "answers": svc.read(lambda L: L.review(score, limit))}


@router.get("/v1/review")
def to_review(svc: Svc, who: Caller, grounded_below: float = Query(REVIEW_AT, ge=0, le=1),
              judge_below: float = Query(JUDGE_REVIEW_AT, ge=0, le=1), refusals: bool = False,
              limit: int = Query(50, ge=1, le=500)):
    """What a reviewer should read first (rag_app/quality/review.py): answers users marked wrong, grounded
    at most `grounded_below`, citing what was not sent, or judged faithful at most `judge_below` (both
    inclusive), newest first, each with why and its unsupported claims. `refusals=true`: the answers that
    refused instead (never listed as ungrounded)."""
    check_admin(who, "the review list")
    return {"grounded_below": grounded_below, "judge_below": judge_below, "refusals": refusals,
            "answers": svc.read(lambda L: L.to_review(grounded_below, limit, judge_below=judge_below,
                                                      refusals=refusals))}


@router.post("/v1/queries/{query_id}/feedback")
def query_feedback(query_id: str, req: FeedbackRequest, svc: Svc, who: Caller):
    """A user's word on an answer (-1 wrong, 0 unsure, 1 right, a comment): kept in the ledger beside
    its cost and quality; the same user's second word replaces the first."""
    from rag_app.core import utcnow

    own_query(svc, who, query_id)
    user = user_for(who, req.user_id) or ""
    return svc.read(lambda L: L.add_feedback(query_id, user, req.score, req.comment, utcnow()), flush=False)


@router.get("/v1/queries/{query_id}/answer")
def query_answer(query_id: str, svc: Svc, who: Caller):
    """The answer, citations and passages of one of the last answers this server gave (kept in memory)."""
    if seen_user(who) is not None:
        own_query(svc, who, query_id)
    kept = svc.answers.get(query_id)
    if kept is None:
        raise HTTPException(404, f"no answer text kept for {query_id[:80]!r}: this server keeps the last "
                                 f"{svc.answers.limit} answers it gave, in memory (not `rag ask`'s, not "
                                 f"across restarts); its costs are at /v1/queries/{query_id[:80]}")
    return kept


QUALITY_COLUMNS = ("groundedness", "refusal", "invalid_citations", "feedback_up", "feedback_down", "judge_score",
                   "judge_faithfulness")


def query_json(r: dict) -> dict:
    """One query as the API lists it: who asked (`user_id`, and `api_key_id`: the issued key's name, or
    12 hex digits of RAG_API_TOKEN's hash) beside what it cost; a listed query also its answer's quality
    (null: not recorded), what grading it cost and each billed stage's tokens and cost. A member lists
    only its own user's."""
    out = {"query_id": r["query_id"], "user_id": r["user_id"], "api_key_id": r["api_key_id"],
           "question": r["question"], "variant": r["variant"],
           "experiment": r["experiment"], "mode": r["mode"], "status": r["status"], "started_at": r["started_at"],
           "latency_ms": r["latency_ms"], "input_tokens": r["input_tokens"], "output_tokens": r["output_tokens"],
           "cost_usd": usd_json(r["cost_nano_usd"]), "shadow_cost_usd": usd_json(r["shadow_cost_nano_usd"]),
           "priced_cost_usd": usd_json(r["priced_cost_nano_usd"]), "unpriced_rows": r["unpriced_rows"],
           "estimated_rows": r["estimated_rows"], "output_at_risk_tokens": r["output_at_risk_tokens"],
           "retries": r["retries"], "timeouts": r["timeouts"]}
    out["generate_tokens"] = r["generate_input_tokens"] + r["generate_output_tokens"]  # the answer's own LLM tokens
    if "groundedness" in r:  # a listed query: its answer's quality beside its cost (null: not recorded)
        out.update({k: r[k] for k in QUALITY_COLUMNS})
    out.update(r.get("billed") or {})  # a listed query: evaluation_cost_usd, <stage>_tokens, _cost_usd, ...
    return out


LIST_COLUMNS = ["query_id", "user_id", "api_key_id", "question", "variant", "experiment", "mode", "status",
                "started_at", "latency_ms", "input_tokens", "output_tokens", "cost_usd", "shadow_cost_usd",
                "priced_cost_usd", "unpriced_rows", "estimated_rows", "output_at_risk_tokens", "retries", "timeouts",
                "generate_tokens", *QUALITY_COLUMNS, "evaluation_cost_usd"]  # a CSV that matched nothing
