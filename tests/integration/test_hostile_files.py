"""Hostile files cost bounded seconds and megabytes and become that file's error; the batch goes on.

Real files generated here, parsed in the real worker process (rag_app/ingest/sandbox.py).
"""
from __future__ import annotations

import time
from functools import partial

import pytest

from rag_app.chunking.legal import LegalChunker
from rag_app.indexing import parse_and_chunk
from rag_app.ingest.sandbox import load_limited
from tests.fakes.hostile import law_text, many_paragraphs_docx, whitespace_bomb_docx


def run_batch(files, timeout_s=120.0, max_mb=1024.0):
    load = partial(load_limited, timeout_s=timeout_s, max_mb=max_mb)
    t = time.perf_counter()
    parsed, failed = parse_and_chunk(files, LegalChunker(), load=load)
    return {d.source_path.rsplit("/", 1)[-1]: d for d, _ in parsed}, \
        {o.path.rsplit("/", 1)[-1]: o.error for o in failed}, time.perf_counter() - t


@pytest.fixture
def good(tmp_path):
    p = tmp_path / "good.md"
    p.write_text(law_text(), encoding="utf-8")
    return p


def test_a_million_paragraph_docx_is_stopped_at_the_time_budget(tmp_path, good):
    bomb = many_paragraphs_docx(tmp_path / "paras.docx", 1_000_000)
    assert bomb.stat().st_size < 200_000
    ok, errors, elapsed = run_batch([bomb, good], timeout_s=3)
    assert "RAG_PARSE_TIMEOUT_S" in errors["paras.docx"] and "longer than 3 s" in errors["paras.docx"]
    assert "good.md" in ok  # the batch went on
    assert elapsed < 90  # import of the parser (cold) + 3 s, not the 13+ minutes it took in-process


def test_a_parse_over_the_memory_budget_is_killed_and_named(tmp_path, good):
    bomb = many_paragraphs_docx(tmp_path / "paras.docx", 1_000_000)  # 2.2 GB RSS when parsed unbounded
    ok, errors, _ = run_batch([bomb, good], timeout_s=600, max_mb=200)
    assert "more than 200 MB (RAG_PARSE_MAX_MB)" in errors["paras.docx"]
    assert "good.md" in ok


def test_docx_zip_bomb_is_refused_before_it_inflates(tmp_path, good):
    bomb = whitespace_bomb_docx(tmp_path / "bomb.docx", 300)
    assert bomb.stat().st_size < 1_000_000
    ok, errors, _ = run_batch([bomb, good], max_mb=256)
    assert "unpacks to 300 MB" in errors["bomb.docx"] and "word/document.xml" in errors["bomb.docx"]
    assert "good.md" in ok


def test_deeply_nested_html_names_its_nesting_depth(tmp_path, good):
    page = tmp_path / "deep.html"
    page.write_text("<html><body>" + "<div>" * 5000 + "第一条 本法所称劳动者。" + "</div>" * 5000 + "</body></html>",
                    encoding="utf-8")
    ok, errors, _ = run_batch([page, good])
    assert "nest deeper than 256 levels" in errors["deep.html"] and "OCR" not in errors["deep.html"]
    assert "good.md" in ok


def test_utf16_text_is_decoded_not_called_binary(tmp_path):
    for name, data in (("bom.md", law_text().encode("utf-16")), ("le.txt", law_text().encode("utf-16-le"))):
        (tmp_path / name).write_bytes(data)
    ok, errors, _ = run_batch([tmp_path / "bom.md", tmp_path / "le.txt"])
    assert errors == {}
    assert ok["bom.md"].encoding == ok["le.txt"].encoding == "utf-16"
    assert ok["bom.md"].text == law_text()


def test_a_title_only_file_says_so(tmp_path):
    (tmp_path / "title.md").write_text("# 中华人民共和国劳动法\n", encoding="utf-8")
    _, errors, _ = run_batch([tmp_path / "title.md"])
    assert "only a title or headings" in errors["title.md"] and "chunker dropped" not in errors["title.md"]
