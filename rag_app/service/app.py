"""FastAPI app: `create_app(settings)` builds the service's state once (rag_app/service/deps.py),
installs the edge guard and the error handlers, and includes one router per resource
(rag_app/service/routes/). It defines no route itself."""
from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from rag_app.access import KeyRing
from rag_app.access import RateLimited, RateLimiter
from rag_app.access import Forbidden
from rag_app.config import Settings
from rag_app.core import LLMError, ModelMismatch, RagError, StoreError
from rag_app.service.answers import RecentAnswers
from rag_app.service.deps import ServiceState
from rag_app.service.guards import Guard
from rag_app.service.inputs import public_message, public_validation_errors
from rag_app.service.pool import VariantPool
from rag_app.service.query_service import QueryService
from rag_app.service.routes import ROUTERS
from rag_app.service.routes import AskRequest, api_key_id
from rag_app.spend import AnswerCache
from rag_app.spend import BudgetGate, LedgerDown, Limits, OverBudget, evaluation_admission, load_budgets
from rag_app.spend import alert_webhook
from rag_app.store import DiskFull

log = logging.getLogger(__name__)
RECENT_ANSWERS = 200  # answers kept in memory for the dashboard's query page (service/answers.py)
__all__ = ["AskRequest", "RECENT_ANSWERS", "api_key_id", "create_app"]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("legal-rag")
    except PackageNotFoundError:
        return "unknown"


def build_state(settings: Settings) -> ServiceState:
    # Built before the server starts, not in the lifespan, so a bad experiments file or a locked store
    # fails `rag serve` with one line.
    budgets = load_budgets(settings.budgets_file)  # before the pool: a bad file fails in well under a second
    pool = VariantPool(settings)
    limits = Limits(pool.base.prices.fx)
    for line in pool.base.prices.override_rules():  # a correction that keeps or drops a time rule says so
        log.warning(line)
    limits.check(budgets, settings.budgets_file)
    try:  # load models now: the first request's latency is its own, the load is a `kind=startup` row
        pool.base.warm_up(origin="live")
    except RagError as e:
        log.warning("start-up warm-up incomplete (%s); the first request loads what is missing", e)
    cache = AnswerCache(settings.answer_cache_size) if settings.answer_cache_size > 0 else None
    svc: ServiceState
    # Budgets: every replica admits against the one ledger (the admission needs no flush: a query whose
    # rows are still buffered here counts by its reservation)
    webhook = alert_webhook(settings, lambda fn: svc.read(fn, flush=False))
    gate = BudgetGate.from_settings(budgets, limits, lambda fn: svc.read(fn, flush=False), settings, pool.base.prices,
                                    webhook)
    if pool.base.judge is not None:  # evaluation budgets stop the judge's sampling, never an answer
        pool.base.judge.admit = evaluation_admission(gate, settings, pool.base.prices)
    rate = RateLimiter(lambda fn: svc.read(fn, flush=False), fail_open=settings.budget_ledger_down == "open")
    keys = KeyRing(lambda h: svc.read(lambda L: L.key_by_secret(h), flush=False),
                   lambda: svc.read(lambda L: L.any_keys(), flush=False))
    svc = ServiceState(settings, pool, budgets, limits, gate,
                       QueryService(lambda: pool, gate, cache, settings.data_dir, rate),
                       RecentAnswers(RECENT_ANSWERS), webhook, keys)
    keys.issued()  # read once at start-up: what stands if the ledger is unreachable later
    audit_budget_file(svc)
    pool.start_ramp(webhook)  # a ramped experiment moves by itself (rag_app/experiments/ramp.py)
    return svc


def audit_budget_file(svc: ServiceState) -> None:
    """A changed RAG_BUDGETS_FILE is an audit row (who: the shell user and host that started the service)."""
    path = svc.settings.budgets_file
    if path is None:
        return
    import getpass
    import socket

    from rag_app.access import audit_budgets

    try:
        actor = f"file:{getpass.getuser()}@{socket.gethostname()}"
        svc.read(lambda L: audit_budgets(L, path, path.read_text(encoding="utf-8"), actor), flush=False)
    except Exception as e:  # an audit row never stops the service; the file itself was checked above
        log.warning("the budgets file's audit row was not written: %s", getattr(e, "detail", e))


def create_app(settings: Settings, *, bind_host: str | None = None) -> FastAPI:
    svc = build_state(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        svc.close()

    app = FastAPI(title="legal-rag", version=_version(), lifespan=lifespan,
                  description="Legal-document RAG that records what every answer costs.")
    app.state.svc = svc
    app.add_middleware(Guard, allowed_hosts=settings.host_allow_list(bind_host),
                       max_body_bytes=int(settings.max_request_mb * 2**20), max_json_bytes=2**20,
                       token=settings.api_token)
    install_error_handlers(app, settings)
    for router in ROUTERS:
        app.include_router(router)
    return app


def install_error_handlers(app: FastAPI, settings: Settings) -> None:
    @app.exception_handler(OverBudget)
    async def over_budget(request: Request, exc: OverBudget):
        return JSONResponse(exc.body, status_code=429, headers={"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(RateLimited)
    async def rate_limited(request: Request, exc: RateLimited):
        return JSONResponse(exc.body, status_code=429, headers={"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(Forbidden)
    async def forbidden(request: Request, exc: Forbidden):
        return JSONResponse({"detail": str(exc), "type": "forbidden"}, status_code=403)

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
