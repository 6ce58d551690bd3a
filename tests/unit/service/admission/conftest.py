"""One real app (an empty data dir: store, ledger writer, price table) and a real ledger under it, shared
by the step tests; `ctx()` builds the per-request context a step reads, as the query service does."""
from __future__ import annotations

import pytest

from rag_app.app import RagApp
from rag_app.service.admission import Admission, QueryRequest
from rag_app.service.shell import OneApp
from rag_app.spend.estimate import question_estimate
from tests.conftest import make_settings
from tracing.ledger import Ledger


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    with RagApp(make_settings(tmp_path_factory.mktemp("admission"))) as app:
        yield app


@pytest.fixture(scope="module")
def ledger(app):
    with Ledger.open(app.settings.ledger) as L:
        yield L


@pytest.fixture
def ctx(app):
    def build(req: QueryRequest | None = None, router=None, **fields) -> Admission:
        req = req or QueryRequest("一人有限责任公司是什么？")
        router = router or OneApp(app)
        route = router.route(req.user_id, req.session_id, req.key_id, req.variant, req.collection)
        # as the service estimates it, with an LLM: a question that costs something
        estimate = question_estimate(req.question, app.settings, app.prices, use_llm=True)
        return Admission(req, router, route, app, estimate, **fields)
    return build


def rows(app, sql: str, **params) -> list[tuple]:
    from tests.fakes.sql_ledger import select_rows

    app.writer.flush()
    return select_rows(app.settings.ledger, sql, **params)
