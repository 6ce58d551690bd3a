"""What a route may ask for: the service's state (settings, the variant pool, the budget gate, the
answer cache, the ledger reader) and the caller. Routes declare these as typed `Depends` aliases
(`Svc`, `Authed`) and never build anything themselves; `create_app` builds one `ServiceState` and
puts it on `app.state`."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, TypeVar

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from rag_app.access import OPEN, KeyRing, Principal, Unauthorized, bootstrap
from rag_app.access import RateLimiter
from rag_app.config import Settings
from rag_app.core import RagError
from rag_app.service.answers import AnswerArchive
from rag_app.service.guards import token_matches
from rag_app.service.inputs import public_message
from rag_app.service.pool import VariantPool
from rag_app.service.query_service import QueryService
from rag_app.spend import Budget, BudgetGate, Limits
from rag_app.spend import Webhook
from tracing.ledger import SERVICE_BOUNDS, Ledger, LedgerUnavailable, is_transient

log = logging.getLogger(__name__)
T = TypeVar("T")
bearer = HTTPBearer(auto_error=False)
Bearer = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


@dataclass
class ServiceState:
    settings: Settings
    pool: VariantPool
    budgets: list[Budget]
    limits: Limits
    gate: BudgetGate
    queries: QueryService
    answers: AnswerArchive
    webhook: Webhook | None
    keys: KeyRing
    upload_lock: threading.Lock = field(default_factory=threading.Lock)
    # One pooled reader for every request (connect, statement and lock bounded by SERVICE_BOUNDS: a
    # frozen server is a 503 in seconds, never a hung request), opened on first use.
    _readers: list[Ledger] = field(default_factory=list)
    _readers_lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self, fn: Callable[[Ledger], T], flush: bool = True) -> T:
        """fn(ledger) for a request; the ledger down or frozen is a 503 naming it (never a 500)."""
        if flush:
            self.pool.base.writer.flush(2.0)  # just-written rows show; bounded, at once while the ledger fails
        try:
            with self._readers_lock:
                if not self._readers:
                    self._readers.append(Ledger.attach(self.settings.ledger, bounds=SERVICE_BOUNDS))
            return fn(self._readers[0])
        except LedgerUnavailable as e:
            raise HTTPException(503, str(e)) from None
        except Exception as e:
            if not is_transient(e):
                raise
            raise HTTPException(503, f"ledger {self.settings.ledger} unreachable ({type(e).__name__}); "
                                     "new rows wait in memory, retry shortly") from None

    def error_body(self, e: BaseException) -> dict:
        """A streamed query's `error` event: a RagError's own words (paths made public), else no details."""
        if isinstance(e, RagError):
            return {"detail": public_message(str(e), self.settings.data_dir), "type": type(e).__name__}
        log.error("streamed query failed", exc_info=e)
        return {"detail": "the query failed; its rows in the ledger say where", "type": type(e).__name__}

    def close(self) -> None:
        if self.webhook is not None:
            self.webhook.close()
        self.pool.close()
        for r in self._readers:
            r.close()


def state(request: Request) -> ServiceState:
    return request.app.state.svc


Svc = Annotated[ServiceState, Depends(state)]


def principal_of(svc: ServiceState, given: str | None) -> Principal:
    """Who a bearer secret is: the bootstrap admin (RAG_API_TOKEN), an issued key, or, while no token is
    set and no key was ever issued, anyone (the service is open, as before keys). Unauthorized otherwise."""
    token = svc.settings.api_token
    if given and token is not None and token_matches(given, token):
        return bootstrap(token)
    if token is None and not svc.keys.issued():
        return OPEN
    if not given:
        raise Unauthorized("missing bearer token: send `Authorization: Bearer <API key>` (rag keys create)")
    return svc.keys.resolve(given)


def caller(svc: Svc, creds: Bearer) -> Principal:
    try:
        return principal_of(svc, creds.credentials if creds else None)
    except Unauthorized as e:
        raise HTTPException(401, str(e), headers={"WWW-Authenticate": "Bearer"}) from None


Caller = Annotated[Principal, Depends(caller)]
Authed = [Depends(caller)]  # a router's `dependencies=`: every route on it needs a key


def admin_ok(svc: ServiceState, creds: HTTPAuthorizationCredentials | None) -> bool:
    """True when the request's key is a good admin key (for routes that answer less to anyone else)."""
    try:
        return principal_of(svc, creds.credentials if creds else None).admin
    except Exception:  # a wrong key, or the ledger down with a key never read: less detail, never a failure
        return False


