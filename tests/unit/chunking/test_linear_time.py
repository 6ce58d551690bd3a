"""Every chunker and loader step is linear in its input, on each pathological shape found so far.

Growth is measured, not wall time: the same input at n and 4n, best of a few runs, and a
generous ratio bound (linear ~4x, quadratic ~16x). Where work can be counted it is counted.
"""
from __future__ import annotations

import hashlib
import random
import time

from rag_app.chunking.baselines import FixedTokenChunker, SentencePackChunker
from rag_app.chunking.legal import LegalChunker, _hard_cut, _span_counter
from rag_app.chunking.semantic import adjacent_similarity, tfidf_vectorize
from rag_app.chunking.structure import heading_level
from rag_app.ingest.loaders import text_blocks
from rag_app.ingest.pdftext import restore_lines
from rag_app.core.types import ParsedDocument

LINEAR_BOUND = 10.0  # 4x input: linear code stays near 4 (6-9 seen on a loaded machine), quadratic lands near 16


def doc_of(text: str) -> ParsedDocument:
    return ParsedDocument("/tmp/x.md", "d1", hashlib.sha256(text.encode()).hexdigest(), "x", text,
                          tuple(text_blocks(text)), "markdown")


def best_time(fn, arg, runs: int = 5) -> float:
    # CPU time of this process, best of several: a machine busy with other jobs inflates wall time
    # of single runs by several times, which a ratio of two wall times cannot tell from growth.
    best = float("inf")
    for _ in range(runs):
        t = time.process_time()
        fn(arg)
        best = min(best, time.process_time() - t)
    return max(best, 1e-3)


def growth(fn, make, n: int) -> float:
    small, big = make(n), make(4 * n)
    fn(small)  # warm caches and imports
    return best_time(fn, big) / best_time(fn, small)


def cjk_line(n: int) -> str:
    rng = random.Random(n)
    return "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(n))


def test_hard_cut_counts_linear_tokenizer_work_on_an_unpunctuated_line():
    def chars_encoded(n: int) -> int:
        text = cjk_line(n)
        seen = []
        counter = _span_counter(text)

        def counting(a, b):
            seen.append(b - a)
            return counter(a, b)
        pieces = _hard_cut(text, 0, len(text), 512, counting)
        assert pieces[0][0] == 0 and pieces[-1][1] == len(text)
        assert all(a < b and counter(a, b) <= 512 for a, b in pieces)
        assert all(p[1] == q[0] for p, q in zip(pieces, pieces[1:]))  # gap-free cover
        return sum(seen)
    # quadratic before: every candidate prefix of the remainder was re-tokenized
    assert chars_encoded(80_000) / chars_encoded(20_000) < 5


def test_legal_chunker_is_linear_on_a_long_line_without_sentence_ends():
    chunker = LegalChunker()
    assert growth(lambda t: chunker.chunk(doc_of(t)), cjk_line, 20_000) < LINEAR_BOUND


def test_legal_chunker_is_linear_on_huge_paragraph_counts():
    def many_paragraphs(n: int) -> str:
        rng = random.Random(n)
        return "\n".join("".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(8)) + "。" for _ in range(n))
    chunker = LegalChunker()
    assert growth(lambda t: chunker.chunk(doc_of(t)), many_paragraphs, 2_000) < LINEAR_BOUND


def test_tfidf_similarity_stays_sparse_on_many_distinct_sentences():
    rng = random.Random(0)
    sents = ["".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(12)) + "。" for _ in range(3000)]
    vectors = tfidf_vectorize(sents)
    assert hasattr(vectors, "tocsr")  # a dense 3000 x ~40k matrix would be ~1 GB
    sims = adjacent_similarity(vectors)
    assert len(sims) == 2999 and all(-1e-9 <= s <= 1 + 1e-9 for s in sims)


def test_markdown_heading_with_a_long_space_run_is_linear():
    assert heading_level("# 第一章 总则") == ("chapter", "第一章 总则")
    assert growth(heading_level, lambda n: "# a" + " " * n + "b", 20_000) < LINEAR_BOUND


def test_pdf_line_restoring_is_linear_on_a_long_space_run():
    assert restore_lines("前文。 第五条 国家") == "前文。\n第五条 国家"
    assert growth(restore_lines, lambda n: "x" + " " * n + "y", 20_000) < LINEAR_BOUND


def test_baseline_chunkers_are_linear_on_huge_paragraph_counts():
    text_of = lambda n: "\n".join(f"第{i}段内容说明。" for i in range(n))  # noqa: E731
    for chunker in (FixedTokenChunker(256), SentencePackChunker(256, 0.2)):
        assert growth(lambda t: chunker.chunk(doc_of(t)), text_of, 5_000) < LINEAR_BOUND, chunker.name
