"""`rag ask` through the same query service and admission as `rag serve`, over one RagApp, without HTTP.

The shell asks as the API key `cli` for the user `--user` (default: the OS user), with an admin's rights
(whoever runs `rag` already holds the data dir and the ledger). So RAG_BUDGETS_FILE's budgets on the key
`cli`, on that user and on the variant bind it exactly as they bind a request (a refusal is OverBudget,
which `rag ask` prints as one line, exit 3), a budget event goes to RAG_ALERT_WEBHOOK, and the ledger
rows carry user_id and api_key_id `cli`. The answer cache serves it within its process: the cache lives
in memory beside the collection (rag_app/spend/answer_cache.py), so `rag ask`, one question a process, is
answered live on each run. There is no experiment routing: the app answers as RAG_VARIANT (`--variant`
labels the rows), as `rag ask` always did, and its rows keep origin `cli`."""
from __future__ import annotations

import getpass
import os
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rag_app.access import ADMIN, Principal
from rag_app.access import RateLimiter
from rag_app.app import RagApp
from rag_app.core import ConfigError
from rag_app.core import Answer
from rag_app.experiments import ExperimentConfig
from rag_app.query import Scope
from rag_app.service.pool import Route
from rag_app.service.query_service import QueryRequest, QueryService
from rag_app.spend import alert_webhook
from rag_app.spend import AnswerCache
from rag_app.spend import BudgetGate, Limits, load_budgets
from tracing.ledger import Ledger

CLI_KEY = "cli"  # the api_key_id of every `rag ask`: a budget {"key": "cli", ...} binds the shell


def os_user() -> str:
    """Who runs the command: the login name, else (a container with no passwd entry) `uid-N`, so a
    `user` budget still binds it."""
    try:
        return getpass.getuser()
    except Exception:
        return f"uid-{os.getuid()}"


def shell_principal(user: str | None = None) -> Principal:
    return Principal(CLI_KEY, user if user is not None else os_user(), ADMIN)


def shell_request(question: str, user: str | None = None, variant: str | None = None,
                  scope: Scope | None = None) -> QueryRequest:
    """`rag ask`'s question as the query service takes it: the key `cli`, the user `--user` or the OS user."""
    p = shell_principal(user)
    return QueryRequest(question, user_id=p.user, scope=scope, key_id=CLI_KEY, variant=variant, principal=p)


class OneApp:
    """The router over one RagApp: every question runs on it, as RAG_VARIANT or the variant asked for (a
    label on its rows: the shell has no experiments to route by), with origin `cli`."""

    def __init__(self, app: RagApp):
        self.base = app
        self.config = ExperimentConfig.load(None)  # one variant, "default", with no overrides

    def route(self, user_id: str | None = None, session_id: str | None = None, api_key_id: str | None = None,
              variant: str | None = None, collection: str | None = None) -> Route:
        self._check(collection)
        name = variant or self.base.settings.variant
        extra = {"user_id": user_id, "session_id": session_id, "origin": "cli", "api_key_id": api_key_id}
        return Route(str(uuid.uuid4()), name, "default", None, None, extra, collection)

    def app_for(self, variant: str, collection: str | None = None) -> RagApp:
        self._check(collection)
        return self.base

    def run(self, route: Route, question: str, scope: Scope | None = None, callbacks: Sequence[Any] = ()) -> Answer:
        return self.base.ask(question, query_id=route.query_id, variant=route.variant, extra=route.extra,
                             scope=scope, callbacks=callbacks)

    def _check(self, collection: str | None) -> None:
        if collection not in (None, self.base.settings.collection):
            raise ConfigError(f"this app reads collection {self.base.settings.collection!r}, not {collection!r}; "
                              "set RAG_COLLECTION")


@contextmanager
def shell_service(app: RagApp) -> Iterator[QueryService]:
    """The query service `rag serve` builds, over `app`: RAG_BUDGETS_FILE (checked here, before any
    question: a bad file is one line), RAG_ANSWER_CACHE_SIZE, RAG_ALERT_WEBHOOK, and a ledger reader that
    connects only when a budget or a key's limit needs it. Closed on exit (queued alerts are tried first, each within
    RAG_ALERT_WEBHOOK_DEADLINE_S)."""
    settings = app.settings
    budgets = load_budgets(settings.budgets_file)
    limits = Limits(app.prices.fx)
    limits.check(budgets, settings.budgets_file)
    reader = Ledger.attach(settings.ledger)  # no connection until the first read

    def read(fn: Any) -> Any:
        return fn(reader)

    webhook = alert_webhook(settings, read)
    gate = BudgetGate.from_settings(budgets, limits, read, settings, app.prices, webhook)
    rate = RateLimiter(read, fail_open=settings.budget_ledger_down == "open")
    cache = AnswerCache(settings.answer_cache_size) if settings.answer_cache_size > 0 else None
    router = OneApp(app)
    try:
        yield QueryService(lambda: router, gate, cache, None, rate)
    finally:
        if webhook is not None:  # a short-lived command: the events it raised are tried before it exits
            webhook.wait()
            webhook.close()
        reader.close()
