"""The store as the app uses it: an earlier version's store is recognised and rebuilt, a second
process gets one line naming the holder, and queries keep answering while documents are ingested."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading

import pytest

from rag_app.app import RagApp
from rag_app.core.errors import OutdatedStore
from rag_app.store.edge import EdgeStore
from tests.conftest import HANG_S, REPO, make_settings

QUESTION = "公司法第五十七条的内容是什么？"


@pytest.mark.shared_data
def test_store_built_by_an_earlier_version_asks_for_rebuild_then_rebuilds(tmp_path, small_corpus):
    with RagApp(make_settings(tmp_path, retriever="bm25", store_backend="local")) as old:
        old.ingest([small_corpus])  # the qdrant-client local-mode layout of earlier versions
    assert (tmp_path / "data" / "qdrant" / "collection" / "legal").exists()
    with RagApp(make_settings(tmp_path, retriever="bm25")) as app:
        with pytest.raises(OutdatedStore, match=r"rag ingest --rebuild PATH"):
            app.ask(QUESTION)
        with pytest.raises(OutdatedStore):
            app.ingest([small_corpus])  # a plain ingest must not silently start a second store
        report = app.ingest([small_corpus], rebuild=True)
        assert {o.status for o in report.outcomes} == {"written"}
        assert app.ask(QUESTION).contexts[0].chunk.title.endswith("公司法")
    assert not (tmp_path / "data" / "qdrant").exists()


def test_second_process_gets_one_line_naming_store_and_holder(tmp_path):
    data = tmp_path / "data"
    with EdgeStore(data / "edge"):
        res = subprocess.run([sys.executable, "-m", "rag_app.cli.main", "ask", QUESTION], capture_output=True,
                             text=True, timeout=HANG_S, cwd=tmp_path,
                             env={**os.environ, "RAG_DATA_DIR": str(data), "PYTHONPATH": str(REPO), "COLUMNS": "60"})
    assert res.returncode == 2
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, res.stderr
    assert str(data / "edge") in lines[0] and f"in use by process {os.getpid()}" in lines[0]


@pytest.mark.shared_data
def test_queries_keep_answering_while_documents_are_ingested(tmp_path, small_corpus):
    first, rest = tmp_path / "first", tmp_path / "rest"
    for f in small_corpus.rglob("*.md"):
        target = (first if "公司法" in f.name else rest) / f.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, target)
    with RagApp(make_settings(tmp_path, retriever="bm25")) as app:
        app.ingest([first])
        errors, answered = [], []
        stop = threading.Event()

        def ask_loop():
            while not stop.is_set():
                try:
                    answered.append(bool(app.ask(QUESTION).contexts))
                except Exception as e:  # noqa: BLE001 - any failure fails the test
                    errors.append(e)
                    return

        threads = [threading.Thread(target=ask_loop) for _ in range(2)]
        for t in threads:
            t.start()
        app.ingest([rest])
        changed = first / next(first.iterdir()).name
        changed.write_text(changed.read_text(encoding="utf-8") + "\n第九百九十九条 新增条文。\n", encoding="utf-8")
        report = app.ingest([first])  # replaces the changed law while queries run
        stop.set()
        for t in threads:
            t.join()
        assert errors == [] and answered and all(answered)
        assert {o.status for o in report.outcomes} == {"written"}
        titles = {p["title"] for p in app.store.all_payloads("legal")}
        assert len(titles) == 3 and len({p["content_hash"] for p in app.store.all_payloads("legal")
                                          if "公司法" in p["title"]}) == 1
