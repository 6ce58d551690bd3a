"""Start-up is booked apart from query latency: `warm_up` loads what the query path uses before the first
question and books the load as a `kind=startup` row, which reports and comparisons do not count."""
from __future__ import annotations

from rag_app import levers
from tests.conftest import LAWS, ingested_app
from tracing.ledger import Ledger

LAW = "社会法/劳动法(2018-12-29).md"


def test_warm_up_loads_the_models_and_books_a_startup_row(tmp_path):
    with ingested_app(tmp_path, {"劳动法.md": (LAWS / LAW).read_text(encoding="utf-8")}) as app:
        levers._rescorers.clear()  # as in a fresh process
        ms = app.warm_up()
        assert ms is not None and ms > 0
        assert any(k[0] == app.settings.rescore_model for k in levers._rescorers)  # loaded here, not by a question
        answer = app.ask("劳动合同的试用期最长多久？")
        app.writer.flush()
        with Ledger.open(app.settings.ledger) as L:
            startup = L.list_queries()  # queries only
            report = L.report()
        assert report.totals["queries"] == 1 and startup[0] == 1 and startup[1][0]["query_id"] == answer.query_id
    from tests.fakes.sql_ledger import select_rows

    rows = select_rows(app.settings.ledger, "SELECT kind, latency_ms FROM queries WHERE kind = 'startup'")
    assert len(rows) == 1 and rows[0][1] == ms


def test_warm_up_before_ingest_books_nothing(tmp_path):
    from rag_app.app import RagApp
    from tests.conftest import make_settings

    with RagApp(make_settings(tmp_path)) as app:
        assert app.warm_up() is None
