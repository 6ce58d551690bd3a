"""Re-ingesting an unchanged file costs no parsing: its bytes' hash is compared with the version the
collection holds before the file goes to a parser worker (issue 22 item 3)."""
from __future__ import annotations

import chains.ingestion as ingestion
from tests.conftest import ingested_app
from tests.integration.test_rerank_http import LAW


def test_unchanged_files_are_recognised_before_parsing_and_changed_ones_are_parsed(tmp_path, monkeypatch):
    parsed = []
    real = ingestion.prepare_limited

    def counting(path, *a, **kw):
        parsed.append(path.name)
        return real(path, *a, **kw)

    monkeypatch.setattr(ingestion, "prepare_limited", counting)
    laws = {"a.md": LAW, "b.md": LAW.replace("示例公司法", "示例合伙企业法")}
    with ingested_app(tmp_path, laws, retriever="bm25", retrieval_levers="none") as app:
        assert sorted(parsed) == ["a.md", "b.md"]
        corpus = tmp_path / "corpus"
        (corpus / "b.md").write_text(laws["b.md"] + "\n第九十九条 新增的条文。\n", encoding="utf-8")
        parsed.clear()
        report = app.ingest([corpus])
        assert parsed == ["b.md"]  # a.md was not parsed again
        status = {o.path.rsplit("/", 1)[1]: (o.status, o.chunks) for o in report.outcomes}
        assert status["a.md"][0] == "unchanged" and status["a.md"][1] >= 1 and status["b.md"][0] == "written"

        parsed.clear()  # an override to another type re-chunks the file even though its bytes are the same
        report = app.ingest([corpus], doc_types=(("a.md", "contract"),))
        assert parsed == ["a.md"]


def test_a_folder_says_what_it_skipped_and_nothing_ingestible_is_exit_1(tmp_path, monkeypatch):
    """A file in a folder that is not a document type is `skipped` with why (never passed over in silence);
    an input where nothing was written or found unchanged exits 1 with one line."""
    from typer.testing import CliRunner

    from rag_app.cli.main import app

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "scan.exe").write_bytes(b"MZ")
    (tmp_path / "docs" / ".DS_Store").write_bytes(b"\\0")  # hidden: passed over
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    res = CliRunner().invoke(app, ["ingest", str(tmp_path / "docs")])
    text = " ".join(res.output.split())
    assert res.exit_code == 1, res.output
    assert "skipped" in text and "scan.exe: not read: .exe is not a document type we read" in text
    assert ".DS_Store" not in text and "nothing ingestible" in text
