"""Start-up is booked apart from query latency: `warm_up` loads what the query path uses before the first
question and books the load as a `kind=startup` row, which reports and comparisons do not count."""
from __future__ import annotations

from rag_app.query import levers
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


def test_the_first_question_loads_nothing_that_warm_up_did_not(tmp_path, monkeypatch):
    """`rag ask` asks one question per process: before warm_up loaded jieba's dictionary and the token
    counters, that question took 1.7 s to retrieve and 0.75 s to answer extractively (~10 ms and ~5 ms
    once loaded), and its ledger row said so."""
    from rag_app.models import model_tokens
    from rag_app.text import sparse, tokens

    loaders = [sparse._jieba, tokens.encoding, model_tokens.tokenizer_for, model_tokens.o200k]
    with ingested_app(tmp_path, {"劳动法.md": (LAWS / LAW).read_text(encoding="utf-8")}) as app:
        for load in loaders:  # as in a fresh process
            load.cache_clear()
        app.store.forget_derived(app.settings.collection)
        assert app.warm_up() is not None
        misses = [load.cache_info().misses for load in loaders]
        listed = []
        documents = app.store.documents
        monkeypatch.setattr(app.store, "documents", lambda name: listed.append(name) or documents(name))
        app.ask("劳动合同的试用期最长多久？")
        assert [load.cache_info().misses for load in loaders] == misses
        assert listed == []  # the catalogue of documents was built by warm_up


def test_a_fresh_process_first_question_imports_no_module(tmp_path):
    """What warm_up does not load, the first question imports: in a fresh process (as `rag ask` is) that
    was langchain_core's runnables and tracers (~1.5 s) and the price table, inside the question's row."""
    import subprocess
    import sys
    import textwrap

    from tests.conftest import REPO

    with ingested_app(tmp_path, {"劳动法.md": (LAWS / LAW).read_text(encoding="utf-8")}):
        pass
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from rag_app.app import RagApp
        from tests.conftest import make_settings
        with RagApp(make_settings(Path({str(tmp_path)!r}))) as app:
            app.warm_up()
            before = set(sys.modules)
            app.ask("劳动合同的试用期最长多久？")
            print(sorted(set(sys.modules) - before))
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
