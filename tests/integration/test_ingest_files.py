"""`rag ingest` on real law text in every supported format, bad files included, real Qdrant local mode."""
from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rag_app.app import RagApp
from rag_app.cli.main import app as cli
from tests.conftest import LAWS, make_settings
from tests.fakes.documents import law_paragraphs, write_docx, write_pdf

LABOR_LAW = LAWS / "社会法/劳动法(2018-12-29).md"


@pytest.fixture
def mixed_folder(tmp_path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    title, paras = law_paragraphs(LABOR_LAW, 20)
    write_pdf(folder / "labor.pdf", title, paras, per_page=8)
    write_docx(folder / "labor.docx", title, paras[:12],
               table=[["争议金额", "仲裁案件受理费"], ["1000元以下的部分", "40－100元"], ["1001元至50000元的部分", "按4%－5%交纳"]])
    (folder / "labor.html").write_text(
        "<html><head><meta charset='utf-8'><title>x</title></head><body>"
        + "".join(f"<p>{p}</p>" for p in paras[:8]) + "</body></html>", encoding="utf-8")
    gbk_text = "\n\n".join([title, *paras[:6]])
    (folder / "labor_gbk.txt").write_bytes(gbk_text.encode("gb18030"))
    # bad files: each must fail alone, with a message naming it
    (folder / "corrupt.pdf").write_bytes(b"%PDF-1.4\n" + b"\x00garbage" * 50)
    (folder / "empty.md").write_text("", encoding="utf-8")
    (folder / "blank.txt").write_text("   \n\n  \n", encoding="utf-8")
    (folder / "binary.txt").write_bytes(bytes(range(256)) * 10)
    (folder / "fake.docx").write_bytes(b"this is not a zip")
    with zipfile.ZipFile(folder / "nodata.docx", "w") as z:
        z.writestr("readme.txt", "no document.xml inside")
    return folder


def ingest(tmp_path, *paths):
    runner = CliRunner()
    env = {"RAG_DATA_DIR": str(tmp_path / "data"), "RAG_RERANK_MODEL": "none"}
    return runner.invoke(cli, ["ingest", *map(str, paths)], env=env, catch_exceptions=False)


def test_mixed_batch_ingests_good_files_and_reports_each_bad_one(tmp_path, mixed_folder):
    result = ingest(tmp_path, mixed_folder)
    out = result.output
    assert result.exit_code == 1, out  # some files failed: non-zero, but only after the rest went in
    with RagApp(make_settings(tmp_path)) as app:
        payloads = app.store.all_payloads("legal")
    by_file = {}
    for p in payloads:
        by_file.setdefault(Path(p["source_path"]).name, []).append(p)
    assert set(by_file) == {"labor.pdf", "labor.docx", "labor.html", "labor_gbk.txt"}
    # PDF: pages and articles survive unstructured's fast strategy
    pdf = by_file["labor.pdf"]
    assert {p["page"] for p in pdf} >= {1, 2, 3}
    pdf_articles = {a for p in pdf for a in p["articles"]}
    assert {"第一条", "第十条", "第二十条"} <= pdf_articles
    assert all(p["title"] == "中华人民共和国劳动法" for p in pdf)
    art16 = next(p for p in pdf if "第十六条" in p["articles"])
    assert art16["heading_path"] == ["第三章 劳动合同和集体合同"]
    # DOCX: articles and the table kept whole, as Markdown
    docx = by_file["labor.docx"]
    assert {"第一条", "第五条"} <= {a for p in docx for a in p["articles"]}
    table = [p for p in docx if p["kind"] == "table"]
    assert len(table) == 1 and table[0]["text"].startswith("【表格】\n| 争议金额 | 仲裁案件受理费 |")
    assert "按4%－5%交纳" in table[0]["text"]
    # GB18030 text detected and decoded
    assert "劳动者" in "".join(p["text"] for p in by_file["labor_gbk.txt"])
    for name, why in [("corrupt.pdf", "PDF"), ("empty.md", "empty"), ("blank.txt", "empty"),
                      ("binary.txt", "binary"), ("fake.docx", "DOCX"), ("nodata.docx", "DOCX")]:
        line = next(l for l in out.splitlines() if name in l)
        assert "error" in line, line
        assert why.lower() in line.lower(), f"{name}: the reason ({why}) is missing from {line!r}"
    flat = " ".join(out.split())
    assert "4 written, 0 unchanged, 6 failed" in flat


def test_reingest_is_idempotent_and_a_changed_file_replaces_its_chunks(tmp_path, small_corpus):
    first = ingest(tmp_path, small_corpus)
    assert first.exit_code == 0, first.output
    with RagApp(make_settings(tmp_path)) as app:
        before = {p["chunk_id"] for p in app.store.all_payloads("legal")}
    second = ingest(tmp_path, small_corpus)
    assert "0 written, 3 unchanged, 0 failed" in " ".join(second.output.split())
    # change one law: drop its last article
    target = next(small_corpus.rglob("劳动法*.md"))
    text = target.read_text(encoding="utf-8")
    target.write_text(text[: text.rindex("第一百零七条")], encoding="utf-8")
    third = ingest(tmp_path, small_corpus)
    assert "1 written, 2 unchanged, 0 failed" in " ".join(third.output.split())
    with RagApp(make_settings(tmp_path)) as app:
        after = app.store.all_payloads("legal")
    labor = [p for p in after if p["source_path"] == str(target.resolve())]
    assert labor and not any("第一百零七条" in p["articles"] for p in labor)
    assert len({p["content_hash"] for p in labor}) == 1  # no stale chunks of the old version
    others = {p["chunk_id"] for p in after if p["source_path"] != str(target.resolve())}
    assert others <= before  # untouched files kept their chunk ids


def test_missing_path_and_unsupported_type_are_per_file_errors(tmp_path, small_corpus):
    odd = tmp_path / "notes.xyz"
    odd.write_text("hello")
    result = ingest(tmp_path, small_corpus, tmp_path / "nope", odd)
    assert result.exit_code == 1
    assert "no such file" in result.output and "unsupported file type .xyz" in " ".join(result.output.split())
    assert "3 written" in " ".join(result.output.split())


def test_a_file_whose_encoding_was_guessed_is_written_with_a_warning(tmp_path):
    """Neither UTF-8 nor GB18030 (Latin-1 here): decoded by charset_normalizer's guess, and the outcome says so."""
    latin1 = tmp_path / "in" / "latin1.txt"
    latin1.parent.mkdir()
    latin1.write_bytes("Café naïve résumé: the Recipient shall keep © confidential. ".encode("latin-1") * 8)
    utf8 = tmp_path / "in" / "plain.txt"
    utf8.write_text("The Recipient shall keep the Information confidential. " * 8, encoding="utf-8")
    result = ingest(tmp_path, latin1.parent)
    assert result.exit_code == 0, result.output
    lines = " ".join(result.output.split())
    assert "warning: not UTF-8 or GB18030: decoded as" in lines and "re-save it as UTF-8" in lines
    assert lines.count("warning:") == 1  # the UTF-8 file has none
