"""Hostile files cost bounded seconds and megabytes and become that file's error; the batch goes on.

Real files generated here, parsed in the real worker process (rag_app/ingest/sandbox.py).
"""
from __future__ import annotations

import os
import random
import time
from functools import partial
from pathlib import Path

import pytest

from rag_app.text import sparse
from rag_app.app import RagApp
from rag_app.chunking.legal import LegalChunker
from rag_app.chunking.semantic import tfidf_vectorize
from rag_app.core.errors import IngestError
from rag_app.ingest.indexing import parse_and_chunk
from rag_app.ingest.sandbox import _run_limited, load_limited, prepare_limited, runs_in_worker
from tests.conftest import make_settings
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
    # The budget is wall time by design (RAG_PARSE_TIMEOUT_S), so this bound is too, with a margin that holds
    # at load 20: about 10x the ~13 s this test takes at load 5 (cold parser import + 3 s), still far
    # below the 13+ minutes the parse took in-process without the budget.
    assert elapsed < 400


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


def never_seen_cjk(path, chars):
    """One unpunctuated line of random CJK: linear to chunk, but jieba's HMM crawls (~10k chars/s)."""
    rng = random.Random(0)
    path.write_text("".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(chars)), encoding="utf-8")
    return path


def test_bm25_tokenization_of_never_seen_text_is_inside_the_parse_budget(tmp_path, good):
    """It used to run in the server after the worker returned: ~40 min of server CPU for 20 MB."""
    line = never_seen_cjk(tmp_path / "line.md", 400_000)  # ~30 s of jieba HMM on an idle core
    with RagApp(make_settings(tmp_path, parse_timeout_s=3)) as app:
        first = app.ingest([good])  # model loads, forkserver start: not what this test measures
        assert [o.status for o in first.outcomes] == ["written"]
        cpu = time.process_time()
        report = app.ingest([line, good])
        server_cpu = time.process_time() - cpu
    outcome = {Path(o.path).name: o for o in report.outcomes}
    assert outcome["line.md"].status == "error"
    assert "longer than 3 s (RAG_PARSE_TIMEOUT_S)" in outcome["line.md"].error
    assert outcome["good.md"].status == "unchanged"
    assert server_cpu < 5, f"the server itself spent {server_cpu:.1f} s CPU on a file it refused"


class _EmbeddingLike:
    """Stands in for LocalEmbeddings: a chunker holding its bound method cannot go to the worker."""

    def embed_array(self, texts):
        return tfidf_vectorize(texts)


def test_a_chunker_that_cannot_travel_still_gets_its_terms_counted_under_the_budget(tmp_path, good):
    chunker = LegalChunker(vectorize=_EmbeddingLike().embed_array)
    assert not runs_in_worker(chunker) and runs_in_worker(LegalChunker())
    line = never_seen_cjk(tmp_path / "line.md", 400_000)
    prepare = partial(prepare_limited, timeout_s=3, max_mb=1024)
    parsed, failed = parse_and_chunk([line, good], chunker, prepare=prepare)
    assert "longer than 3 s (RAG_PARSE_TIMEOUT_S)" in failed[0].error
    [(doc, chunks)] = parsed
    assert all(c.terms is not None for c in chunks)


def test_terms_counted_in_the_worker_give_the_same_bm25_vectors(tmp_path, good):
    [(doc, chunks)], failed = parse_and_chunk([good], LegalChunker(),
                                              prepare=partial(prepare_limited, timeout_s=60, max_mb=1024))
    assert not failed and chunks
    for c in chunks:
        assert sparse.weigh(c.terms, 80.0) == sparse.document_vector(c.indexed_text(), 80.0)


def test_a_new_collection_takes_avgdl_from_the_worker_counts_without_tokenizing_again(monkeypatch, good):
    from types import SimpleNamespace

    from rag_app.ingest.indexing import decide_collection

    [(doc, chunks)], _ = parse_and_chunk([good], LegalChunker(),
                                         prepare=partial(prepare_limited, timeout_s=60, max_mb=1024))
    expected = sum(len(sparse.tokenize(c.indexed_text())) for c in chunks) / len(chunks)
    monkeypatch.setattr(sparse, "tokenize", lambda text: pytest.fail("tokenized in the server"))
    fake = SimpleNamespace(model_name="m", dimension=4, unknown_token_rate=lambda texts: 0.0)
    info = decide_collection("c", LegalChunker(), fake, chunks, max_unk_rate=0.5)
    assert info.avgdl == round(expected, 2)


def test_a_one_line_file_of_body_text_is_indexed_not_taken_for_its_title(tmp_path):
    """It used to become the title, leaving nothing to chunk: 'chunker dropped all of it'."""
    (tmp_path / "sentence.md").write_text("劳动者享有平等就业和选择职业的权利。", encoding="utf-8")
    (tmp_path / "article.txt").write_text("第一条 为了保护劳动者的合法权益，制定本法", encoding="utf-8")
    ok, errors, _ = run_batch([tmp_path / "sentence.md", tmp_path / "article.txt"])
    assert errors == {}
    assert ok["sentence.md"].title == "sentence" and ok["article.txt"].title == "article"


def _worker_pid(**budget):
    return _run_limited("pid", "", os.getpid, **{"timeout_s": 60, "max_mb": 1024, **budget})


def _allocate(mb: int) -> int:
    return len(bytearray(mb * 1024 * 1024))


def test_one_worker_serves_file_after_file(good):
    first = _worker_pid()
    assert first != os.getpid()
    parsed, failed = parse_and_chunk([good, good], LegalChunker(),
                                     prepare=partial(prepare_limited, timeout_s=60, max_mb=1024))
    assert len(parsed) == 2 and not failed
    assert _worker_pid() == first  # no process started per file


def test_a_worker_past_its_time_is_killed_and_the_next_file_gets_a_fresh_one(good):
    before = _worker_pid()
    with pytest.raises(IngestError, match="longer than 1 s"):
        _run_limited("slow.md", "", partial(time.sleep, 30), timeout_s=1, max_mb=1024)
    after = _worker_pid()
    assert after != before
    with pytest.raises(ProcessLookupError):
        os.kill(before, 0)  # the slow one is gone, not left running beside its replacement
    [(doc, chunks)], failed = parse_and_chunk([good], LegalChunker(),
                                              prepare=partial(prepare_limited, timeout_s=60, max_mb=1024))
    assert chunks and not failed


def test_each_file_gets_its_own_memory_budget_and_a_breach_replaces_the_worker():
    before = _worker_pid(max_mb=200)
    assert _run_limited("ok.md", "", partial(_allocate, 120), timeout_s=60, max_mb=200) > 0
    assert _run_limited("ok2.md", "", partial(_allocate, 120), timeout_s=60, max_mb=200) > 0  # not 240 of 200
    assert _worker_pid(max_mb=200) == before
    with pytest.raises(IngestError, match="more than 200 MB"):
        _run_limited("big.md", "", partial(_allocate, 400), timeout_s=60, max_mb=200)
    assert _worker_pid(max_mb=200) != before


_KEPT: list[bytearray] = []


def _keep(mb: int) -> int:
    """A parser that leaks: what it allocates stays in the worker after the file."""
    _KEPT.append(bytearray(mb * 1024 * 1024))
    return mb


def test_a_worker_that_kept_half_a_budget_from_its_files_is_retired():
    before = _worker_pid(max_mb=200)
    assert _run_limited("leaky.md", "", partial(_keep, 40), timeout_s=60, max_mb=200) == 40
    assert _worker_pid(max_mb=200) == before  # a little growth: kept
    assert _run_limited("leaky2.md", "", partial(_keep, 120), timeout_s=60, max_mb=200) == 120
    assert _worker_pid(max_mb=200) != before  # 160 MB kept > half of 200: the next file gets a fresh worker


def test_an_html_page_with_no_text_is_not_told_to_ocr(tmp_path):
    from rag_app.core.errors import EmptyDocument
    from rag_app.ingest.loaders import load_document

    page = tmp_path / "empty.html"
    page.write_text("<html><head><title></title></head><body><div> </div></body></html>", encoding="utf-8")
    with pytest.raises(EmptyDocument) as e:
        load_document(page)
    assert "OCR" not in str(e.value) and "HTML file opens and holds text" in str(e.value)
