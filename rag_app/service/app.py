"""FastAPI app: ask, ingest, ledger queries, reports, experiments. `create_app(settings)`."""
from __future__ import annotations

import hashlib
import logging
import threading
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, File, HTTPException, Query, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, field_validator

from rag_app.text.edge_text import EdgeText
from rag_app.config.settings import Settings
from rag_app.core.errors import LLMError, ModelMismatch, RagError, StoreError
from rag_app.store.space import DiskFull
from rag_app.service.answers import AnswerArchive, RecentAnswers
from rag_app.spend.budgets import (
    BudgetGate,
    LedgerDown,
    Limits,
    OverBudget,
    budget_status,
    event_json,
    load_budgets,
    price_of_a_question,
)
from rag_app.spend.alerts import renderer
from rag_app.spend.webhook import Webhook
from rag_app.service.guards import Guard, token_matches
from rag_app.service.inputs import (AskScope, FeedbackRequest, Timestamp, dashboard_headers, public_message,
                                    public_validation_errors, save_uploads)
from rag_app.service.openai_compat import ChatRequest, ChunkStream, completion, models_payload, question_of, variant_for
from rag_app.service.pool import Route, VariantPool
from rag_app.service.query_service import QueryRequest, QueryService
from rag_app.spend.answer_cache import AnswerCache
from rag_app.service.streaming import SSE_HEADERS, StreamedQuery, rest_of, sse
from rag_app.core.money import usd_json
from tracing.ledger import BY_DIMS, SERVICE_BOUNDS, Ledger, LedgerUnavailable, is_transient, stage_json

log = logging.getLogger(__name__)


log = logging.getLogger(__name__)
DASHBOARD = Path(__file__).parent / "static" / "dashboard.html"


RECENT_ANSWERS = 200  # answers kept in memory for the dashboard's query page (service/answers.py)
MAX_INT = 2**62  # SQLite integers are signed 64-bit; larger offsets were a 500
MAX_QUALITY_DAYS = 366  # days one quality-over-time request may span
MAX_REPORT_ROWS = 10_000  # per-query rows one report request may read (the dashboard asks for 500)


class AskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # {"scopes": ...} was ignored: the answer came unscoped
    question: EdgeText = Field(min_length=1, max_length=8000)
    user_id: EdgeText | None = Field(None, max_length=200)
    session_id: EdgeText | None = Field(None, max_length=200)
    scope: AskScope | None = None
    stream: bool = False  # SSE: tokens as they come, the answer and its cost in the last event

    @field_validator("question")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("question is only whitespace; send the question text")
        return v


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("legal-rag")
    except PackageNotFoundError:
        return "unknown"


def create_app(settings: Settings, *, bind_host: str | None = None) -> FastAPI:
    # Built here, not in the lifespan, so a bad experiments file or a locked store fails `rag serve`
    # with one line before the server starts.
    budgets = load_budgets(settings.budgets_file)  # before the pool: a bad file fails in well under a second
    state: dict = {"pool": VariantPool(settings)}
    limits = Limits(state["pool"].base.prices.fx)
    limits.check(budgets, settings.budgets_file)
    try:  # load models now: the first request's latency is its own, the load is a `kind=startup` row
        state["pool"].base.warm_up(origin="live")
    except RagError as e:
        log.warning("start-up warm-up incomplete (%s); the first request loads what is missing", e)
    upload_lock = threading.Lock()
    cache = AnswerCache(settings.answer_cache_size) if settings.answer_cache_size > 0 else None
    answers: AnswerArchive = RecentAnswers(RECENT_ANSWERS)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        if webhook is not None:
            webhook.close()
        state["pool"].close()
        for r in readers:
            r.close()

    app = FastAPI(title="legal-rag", version=_version(), lifespan=lifespan,
                  description="Legal-document RAG that records what every answer costs.")
    app.add_middleware(Guard, allowed_hosts=settings.host_allow_list(bind_host),
                       max_body_bytes=int(settings.max_request_mb * 2**20), max_json_bytes=2**20,
                       token=settings.api_token)
    bearer = HTTPBearer(auto_error=False)

    def auth(creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        if settings.api_token is None:
            return
        if creds is None or not token_matches(creds.credentials, settings.api_token):
            raise HTTPException(401, "missing or wrong bearer token (RAG_API_TOKEN)",
                                headers={"WWW-Authenticate": "Bearer"})

    def pool() -> VariantPool:
        return state["pool"]

    # One pooled reader for every request (connect, statement and lock bounded by SERVICE_BOUNDS: a
    # frozen server is a 503 in seconds, never a hung request), opened on first use.
    readers: list[Ledger] = []
    readers_lock = threading.Lock()

    def read(fn, flush: bool = True):
        """fn(ledger) for a request; the ledger down or frozen is a 503 naming it (never a 500)."""
        if flush:
            pool().base.writer.flush(2.0)  # just-written rows show; bounded, at once while the ledger fails
        try:
            with readers_lock:
                if not readers:
                    readers.append(Ledger.attach(settings.ledger, bounds=SERVICE_BOUNDS))
            return fn(readers[0])
        except LedgerUnavailable as e:
            raise HTTPException(503, str(e)) from None
        except Exception as e:
            if not is_transient(e):
                raise
            raise HTTPException(503, f"ledger {settings.ledger} unreachable ({type(e).__name__}); "
                                     "new rows wait in memory, retry shortly") from None

    # Budgets: every replica admits against the one ledger (the admission needs no flush: a query whose
    # rows are still buffered here counts by its reservation)
    webhook = (Webhook(settings.alert_webhook, lambda event_id, status: read(
        lambda L: L.set_budget_webhook(event_id, status), flush=False), deadline_s=settings.alert_webhook_deadline_s,
        render=renderer(settings.alert_format)) if settings.alert_webhook else None)
    gate = BudgetGate(budgets, limits, lambda fn: read(fn, flush=False), settings.budget_unpriced, webhook,
                      first_estimate=price_of_a_question(state["pool"].base.prices, settings),
                      ledger_down=settings.budget_ledger_down)
    state["pool"].start_ramp(webhook)  # a ramped experiment moves by itself (rag_app/experiments/ramp.py)

    @app.exception_handler(OverBudget)
    async def over_budget(request: Request, exc: OverBudget):
        return JSONResponse(exc.body, status_code=429, headers={"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(LedgerDown)
    async def budgets_unchecked(request: Request, exc: LedgerDown):
        return JSONResponse({"detail": str(exc), "type": "budget_ledger_down"}, status_code=503,
                            headers={"Retry-After": "5"})

    @app.exception_handler(RagError)
    async def rag_error(request: Request, exc: RagError):
        code = (502 if isinstance(exc, LLMError) else 409 if isinstance(exc, (StoreError, ModelMismatch))
                else 507 if isinstance(exc, DiskFull) else 400)
        return JSONResponse({"detail": public_message(str(exc), settings.data_dir), "type": type(exc).__name__},
                            status_code=code)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        return JSONResponse({"detail": public_validation_errors(exc)}, status_code=422)

    @app.get("/dashboard", response_class=HTMLResponse)
    def dashboard(token: str | None = None, creds: HTTPAuthorizationCredentials | None = Depends(bearer)):
        """The cost dashboard: one static page, no build step, no CDN; it reads the JSON API."""
        if settings.api_token is not None:
            given = token or (creds.credentials if creds else "")
            if not token_matches(given, settings.api_token):
                raise HTTPException(401, "open /dashboard?token=<RAG_API_TOKEN>")
        page = DASHBOARD.read_text(encoding="utf-8")
        return HTMLResponse(page, media_type="text/html; charset=utf-8", headers=dashboard_headers(page))

    @app.get("/v1/reports/queries", dependencies=[Depends(auth)])
    def report_queries(last: int | None = Query(200, ge=1, le=MAX_REPORT_ROWS), variant: str | None = None):
        """Per-query rows exactly as `rag report --format json` prints them (the `last` most recent)."""
        return {"queries": read(lambda L: L.report(last=last, variant=variant)).queries}

    @app.get("/v1/reports/by", dependencies=[Depends(auth)])
    def report_by(dim: str = Query(..., description="user | key | variant | model | day | stage"),
                  variant: str | None = None):
        """Spend per user, API key (`key`: a short hash of the bearer token), variant, model, day or stage,
        most expensive first; rows as `rag report --by DIM --format json` prints them."""
        if dim not in BY_DIMS:
            raise HTTPException(422, f"dim must be one of {', '.join(BY_DIMS)}")
        return {"by": dim, "variant": variant, "rows": read(lambda L: L.by(dim, variant=variant))}

    @app.get("/v1/reports/quality", dependencies=[Depends(auth)])
    def report_quality(since: date | None = None, until: date | None = None,
                       days: int = Query(30, ge=1, le=MAX_QUALITY_DAYS), variant: str | None = None):
        """Per day (UTC) and variant: cost per query beside answers scored, mean groundedness,
        invalid-citation rate and feedback, oldest day first. `since`..`until` (dates, both included);
        without `since`, the `days` days up to `until` (default today)."""
        last = until or datetime.now(UTC).date()
        first = since or last - timedelta(days=days - 1)
        if first > last:
            raise HTTPException(422, "since must not be after until")
        if (last - first).days >= MAX_QUALITY_DAYS:
            raise HTTPException(422, f"at most {MAX_QUALITY_DAYS} days per request")
        rows = read(lambda L: L.quality_over_time(first.isoformat(), last.isoformat(), variant=variant))
        return {"since": first.isoformat(), "until": last.isoformat(), "variant": variant, "rows": rows}

    @app.get("/v1/experiments", dependencies=[Depends(auth)])
    def experiments():
        return {"experiments": sorted(pool().config.experiments), "live": settings.experiment}

    @app.get("/healthz")
    def healthz(creds: HTTPAuthorizationCredentials | None = Depends(bearer)):
        """`up` or `degraded` (rows waiting in memory, a spill file being replayed, rows spilled or lost).
        The details (ledger counters, the OTel exporter's drops) need the token when one is set: paths,
        hosts and endpoints are nobody else's business."""
        ledger_health = pool().base.writer.health()
        body: dict[str, Any] = {"status": "degraded" if ledger_health["status"] == "degraded" else "up"}
        if settings.api_token is not None and (creds is None or not token_matches(creds.credentials, settings.api_token)):
            return body
        body["ledger"] = ledger_health
        body["shadow_skipped"] = pool().shadow_skipped
        if pool().base.judge is not None:  # gradings offered, judged, failed, dropped (a full queue), waiting
            body["judge"] = pool().base.judge.stats()
        if pool().base.otel is not None:  # export is best effort: its drops show here, status stays the ledger's
            body["otel"] = pool().base.otel.health()
        return body

    def key_of(creds: HTTPAuthorizationCredentials | None) -> str | None:
        # spend per API key: the ledger keeps a short hash of the bearer token, never the token
        return api_key_id(creds.credentials) if creds and settings.api_token is not None else None

    service = QueryService(pool, gate, cache, settings.data_dir)

    def run_query(question: str, user_id: str | None, session_id: str | None, scope, key_id: str | None, *,
                  variant: str | None = None, callbacks=(), admitted=None) -> tuple[dict, Route]:
        return service.answer(QueryRequest(question, user_id, session_id, scope, key_id, variant),
                              callbacks=callbacks, admitted=admitted)

    def presented(result: tuple[dict, Route]) -> dict:
        payload, route = result
        answers.put(payload)
        a = route.assignment
        return {**payload,
                "experiment": route.experiment, "variant": route.variant,
                "arm": a.arm if a else None, "sticky": a.sticky if a else None,
                # the figures above come from the answer itself; this says whether its rows are on disk yet
                "ledger": "buffered" if pool().base.writer.failing else "ok"}

    def streamed(run) -> StreamedQuery:
        """Start a query in a worker thread; returns once it is admitted (a refusal raises: its status)."""
        q = StreamedQuery(run)
        q.wait_admitted()
        return q

    def error_body(e: BaseException) -> dict:
        if isinstance(e, RagError):
            return {"detail": public_message(str(e), settings.data_dir), "type": type(e).__name__}
        log.error("streamed query failed", exc_info=e)
        return {"detail": "the query failed; its rows in the ledger say where", "type": type(e).__name__}

    @app.post("/v1/ask", dependencies=[Depends(auth)])
    def ask(req: AskRequest, creds: HTTPAuthorizationCredentials | None = Depends(bearer)):
        """The answer, its citations and its cost. `stream: true`: SSE, `token` events as the LLM sends
        them, then one `answer` event with the whole payload and its cost (or one `error` event)."""
        key_id, scope = key_of(creds), _scope(req.scope)
        if not req.stream:
            return presented(run_query(req.question, req.user_id, req.session_id, scope, key_id))
        q = streamed(lambda callbacks, admitted: run_query(req.question, req.user_id, req.session_id, scope,
                                                            key_id, callbacks=callbacks, admitted=admitted))

        def events():
            for kind, value in q.follow():
                if kind == "token":
                    yield sse({"text": value}, "token")
                elif kind == "error":
                    yield sse(error_body(value), "error")
                else:
                    yield sse(presented(value), "answer")
        return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)

    @app.get("/v1/models", dependencies=[Depends(auth)])
    def models():
        """OpenAI-compatible: `legal-rag` (routed as /v1/ask) and one model per variant."""
        return models_payload(sorted(pool().config.variants))

    @app.post("/v1/chat/completions", dependencies=[Depends(auth)])
    def chat_completions(req: ChatRequest, creds: HTTPAuthorizationCredentials | None = Depends(bearer)):
        """OpenAI-compatible chat completions over the same query path and ledger as /v1/ask
        (rag_app/service/openai_compat.py)."""
        variant = variant_for(req.model, sorted(pool().config.variants))
        question = question_of(req.messages)
        try:
            scope = _scope(req.scope)
        except ValueError as e:
            raise HTTPException(422, f"scope: {e}") from None
        key_id = key_of(creds)
        if not req.stream:
            return completion(presented(run_query(question, req.user, None, scope, key_id, variant=variant)), req.model)
        q = streamed(lambda callbacks, admitted: run_query(question, req.user, None, scope, key_id, variant=variant,
                                                            callbacks=callbacks, admitted=admitted))
        chunks = ChunkStream(req.model).events(q.follow(), q.query_id, presented, rest_of, error_body)

        def events():
            for c in chunks:
                yield sse(c)
            yield "data: [DONE]\n\n"
        return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)

    @app.get("/v1/budgets", dependencies=[Depends(auth)])
    def budgets_now(events: int = Query(20, ge=0, le=500)):
        """Each budget's limit, spend, unpriced calls and reset time (as `rag budgets`), and recent events."""
        month_ago = (datetime.now(UTC) - timedelta(days=31)).isoformat(timespec="milliseconds")
        rows, recent = read(lambda L: (budget_status(L, budgets, limits), L.budget_events(month_ago, events)))
        return {"budgets": rows, "unpriced_policy": settings.budget_unpriced,
                "webhook": settings.alert_webhook is not None, "events": [event_json(e) for e in recent]}

    @app.post("/v1/ingest", dependencies=[Depends(auth)])
    def ingest(files: list[UploadFile] = File(...)):
        """Each file is known by its name: uploading `劳动法.md` again replaces its old chunks."""
        with upload_lock:  # two uploads of one name must not interleave write and index
            pool().base.require_space(sum(_upload_size(f) for f in files))  # 507 before anything is written
            return {"files": save_uploads(files, settings, lambda paths: pool().base.ingest_uploads(paths))}

    @app.get("/v1/queries", dependencies=[Depends(auth)])
    def queries(variant: str | None = None, status: str | None = None, since: Timestamp | None = None,
                until: Timestamp | None = None, experiment: str | None = None,
                limit: int = Query(50, ge=-MAX_INT, le=MAX_INT), offset: int = Query(0, ge=-MAX_INT, le=MAX_INT)):
        limit, offset = min(max(limit, 1), 500), max(offset, 0)  # a page is 1-500 rows; say which was served
        total, rows = read(lambda L: L.list_queries(variant=variant, status=status, since=since, until=until,
                                                    experiment=experiment, limit=limit, offset=offset))
        return {"total": total, "limit": limit, "offset": offset, "queries": [_query_json(r) for r in rows]}

    @app.get("/v1/queries/{query_id}", dependencies=[Depends(auth)])
    def query(query_id: str):
        row, stages, quality, feedback, judged = read(lambda L: (L.query(query_id), L.stage_rows(query_id),
                                                                 L.quality(query_id), L.feedback(query_id),
                                                                 L.judge(query_id)))
        if row is None:
            raise HTTPException(404, f"no query {query_id[:80]!r} in the ledger")  # never echo a long input whole
        if quality is not None:  # the judge's grades beside the local signals; its cost is evaluation spend
            quality = {**quality, "judge": judged}
        return {**_query_json(row), "quality": quality, "feedback": feedback,
                "stages": [stage_json(r) for r in stages]}

    @app.get("/v1/feedback", dependencies=[Depends(auth)])
    def review(score: int = Query(-1, ge=-1, le=1), limit: int = Query(50, ge=1, le=500)):
        """The review list: the latest answers users marked wrong (score -1), unsure (0) or right (1)."""
        return {"score": score, "answers": read(lambda L: L.review(score, limit))}

    @app.get("/v1/review", dependencies=[Depends(auth)])
    def to_review(grounded_below: float = Query(0.5, ge=0, le=1), limit: int = Query(50, ge=1, le=500)):
        """What a reviewer should read first: answers users marked wrong or grounded below
        `grounded_below`, newest first, each with why."""
        return {"grounded_below": grounded_below, "answers": read(lambda L: L.to_review(grounded_below, limit))}

    @app.post("/v1/queries/{query_id}/feedback", dependencies=[Depends(auth)])
    def query_feedback(query_id: str, req: FeedbackRequest):
        """A user's word on an answer (-1 wrong, 0 unsure, 1 right, a comment): kept in the ledger beside
        its cost and quality; the same user's second word replaces the first."""
        from rag_app.models.attempts import utcnow

        if read(lambda L: L.query(query_id)) is None:
            raise HTTPException(404, f"no query {query_id[:80]!r} in the ledger")
        return read(lambda L: L.add_feedback(query_id, req.user_id or "", req.score, req.comment, utcnow()),
                    flush=False)

    @app.get("/v1/queries/{query_id}/answer", dependencies=[Depends(auth)])
    def query_answer(query_id: str):
        """The answer, citations and passages of one of the last RECENT_ANSWERS queries this server answered."""
        kept = answers.get(query_id)
        if kept is None:
            raise HTTPException(404, f"no answer text kept for {query_id[:80]!r}: this server keeps the last "
                                     f"{RECENT_ANSWERS} answers it gave, in memory (not `rag ask`'s, not "
                                     f"across restarts); its costs are at /v1/queries/{query_id[:80]}")
        return kept

    @app.get("/v1/reports/summary", dependencies=[Depends(auth)])
    def summary(last: int | None = Query(None, ge=1, le=MAX_INT), variant: str | None = None):
        # orphans, unknown LLM attempts, quarantined/spilled/lost rows, totals stale or catching up
        rep, ledger_audit, quality = read(lambda L: (L.report(last=last, variant=variant, rows=0), L.audit(),
                                                     L.quality_summary(variant)))
        return {**rep.totals, "quality": quality, "ledger": ledger_audit}

    @app.get("/v1/experiments/{name}", dependencies=[Depends(auth)])
    def experiment(name: str):
        from rag_app.experiments.comparison import compare_live

        exp = pool().config.experiments.get(name)
        if exp is None:
            raise HTTPException(404, f"no experiment {name!r} in RAG_EXPERIMENTS_FILE")
        ramp = pool().ramp
        if ramp is not None and ramp.exp.name == name:  # compared at the step it is served at, with its moves
            return {**read(lambda L: compare_live(L, ramp.live())), "ramp": ramp.state()}
        return read(lambda L: compare_live(L, exp))

    return app


def _upload_size(f: UploadFile) -> int:
    if f.size is not None:
        return f.size
    f.file.seek(0, 2)
    size = f.file.tell()
    f.file.seek(0)
    return size


def _scope(req: AskScope | None):
    from rag_app.query.scope import Scope

    try:
        return Scope(tuple(req.docs), tuple(req.laws)) or None if req else None
    except ValueError as e:  # a blank or overlong name: the same 422 as any other bad field
        raise HTTPException(422, f"scope: {e}") from None


def api_key_id(token: str) -> str:
    """What the ledger records for a bearer token: 12 hex digits of its SHA-256 (tells keys apart, reveals none)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _query_json(r: dict) -> dict:
    return {"query_id": r["query_id"], "question": r["question"], "variant": r["variant"],
            "experiment": r["experiment"], "mode": r["mode"], "status": r["status"], "started_at": r["started_at"],
            "latency_ms": r["latency_ms"], "input_tokens": r["input_tokens"], "output_tokens": r["output_tokens"],
            "cost_usd": usd_json(r["cost_nano_usd"]), "shadow_cost_usd": usd_json(r["shadow_cost_nano_usd"]),
            "priced_cost_usd": usd_json(r["priced_cost_nano_usd"]), "unpriced_rows": r["unpriced_rows"],
            "estimated_rows": r["estimated_rows"], "output_at_risk_tokens": r["output_at_risk_tokens"],
            "retries": r["retries"], "timeouts": r["timeouts"]}
