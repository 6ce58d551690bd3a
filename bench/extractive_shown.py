"""Does the extractive answer show the evidence it retrieved? For each question, in random order, ask
the collection (no LLM) and compare, on the same passages, what a reader sees under the old rule (each
passage's first 400 characters) and the current one (the sentences that best cover the question,
within answer.EXCERPT_TOKENS): the share of questions whose gold evidence lies in a retrieved passage
but is shown under neither, one or both rules, with a paired bootstrap 95% CI, and the tokens shown.

    RAG_DATA_DIR=... RAG_COLLECTION=en .venv/bin/python bench/extractive_shown.py \
        --qa ../shared/data/legal_en/qa_dev.jsonl -n 80

`--chunks CORPUS` leaves retrieval out: each question's first gold span, in the legal chunker's chunk
that holds it, shown or not under each rule (every question, no index needed; both languages):

    .venv/bin/python bench/extractive_shown.py --qa ../shared/data/legal_zh/qa_dev.jsonl \
        --chunks ../shared/data/legal_zh/corpus
"""
from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag_app.query.answer import EXCERPT_TOKENS, document_range  # noqa: E402
from rag_app.app import RagApp  # noqa: E402
from rag_app.chunking.legal import LegalChunker  # noqa: E402
from rag_app.config.settings import load_settings  # noqa: E402
from rag_app.evaluation.qa import Question, load_qa  # noqa: E402
from rag_app.evaluation.stats import mean_ci, paired_diff_ci  # noqa: E402
from rag_app.query.excerpt import Excerpt, best_excerpt  # noqa: E402
from rag_app.ingest.loaders import load_document  # noqa: E402
from rag_app.text.tokens import count_tokens  # noqa: E402
from rag_app.core.types import ScoredChunk  # noqa: E402

OLD_CHARS = 400


def covered(gold, ranges: list[tuple[str, int, int]], share: float) -> bool:
    """Whether at least `share` of one gold span's characters lie inside the shown ranges."""
    for g in gold:
        got = sum(max(0, min(g.char_end, e) - max(g.char_start, s)) for d, s, e in ranges if d.endswith(g.doc))
        if got >= share * (g.char_end - g.char_start):
            return True
    return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qa", type=Path, required=True)
    ap.add_argument("-n", type=int, default=None, help="this many questions, drawn at random (seed 0); default all")
    ap.add_argument("--share", type=float, default=0.5, help="share of a gold span that counts as shown")
    ap.add_argument("--tokens", type=int, default=EXCERPT_TOKENS, help="token budget of one passage")
    ap.add_argument("--chunks", type=Path, default=None, help="corpus folder: score the gold chunks, no retrieval")
    a = ap.parse_args()
    qs = load_qa(a.qa)
    random.Random(0).shuffle(qs)
    qs = qs[:a.n]
    asked = gold_chunks(qs, a.chunks) if a.chunks else asked_contexts(qs)
    # arm -> passage -> (start, end) in the passage text; `first sentences` isolates the choice of sentences
    arms = {f"first {OLD_CHARS} chars": lambda text, q: (0, min(OLD_CHARS, len(text))),
            "first sentences": lambda text, q: _span(best_excerpt(text, "", a.tokens)),
            "best sentences": lambda text, q: _span(best_excerpt(text, q, a.tokens))}
    shown: dict[str, list[float]] = {name: [] for name in ["in a retrieved passage", *arms]}
    tokens: dict[str, int] = {name: 0 for name in arms}
    for q, contexts in asked:
        whole = [(sc.chunk.source_path, sc.chunk.char_start, sc.chunk.char_end) for sc in contexts]
        shown["in a retrieved passage"].append(float(covered(q.gold, whole, a.share)))
        for name, pick in arms.items():
            spans = [(sc, *pick(sc.chunk.text, q.question)) for sc in contexts]
            ranges = [(sc.chunk.source_path, *document_range(sc, s, e)) for sc, s, e in spans]
            shown[name].append(float(covered(q.gold, ranges, a.share)))
            tokens[name] += sum(count_tokens(sc.chunk.text[s:e]) for sc, s, e in spans)
    print(f"{len(shown['in a retrieved passage'])} questions of {a.qa.name}, random order; a gold span counts as shown when "
          f"{a.share:.0%} of it is; {a.tokens} tokens per passage")
    for name, vals in shown.items():
        ci = mean_ci(vals)
        per = f"  {tokens[name] / len(vals):.0f} passage tokens shown per answer" if name in tokens else ""
        print(f"  {name:<24} {ci['mean']:.3f} [{ci['ci95_low']:.3f}, {ci['ci95_high']:.3f}]{per}")
    base = shown[f"first {OLD_CHARS} chars"]
    for name in ("first sentences", "best sentences"):
        d = paired_diff_ci(base, shown[name])
        print(f"  {name} - first {OLD_CHARS} chars  {d['diff']:+.3f} [{d['ci95_low']:+.3f}, {d['ci95_high']:+.3f}]")
    d = paired_diff_ci(shown["first sentences"], shown["best sentences"])
    print(f"  best - first sentences  {d['diff']:+.3f} [{d['ci95_low']:+.3f}, {d['ci95_high']:+.3f}]")


def asked_contexts(qs: list[Question]) -> Iterator[tuple[Question, tuple[ScoredChunk, ...]]]:
    """What `rag ask` sends to the model for each question (the configured collection, no LLM)."""
    with RagApp(load_settings()) as app:
        for q in qs:
            yield q, app.ask(q.question).contexts


def gold_chunks(qs: list[Question], corpus: Path) -> Iterator[tuple[Question, tuple[ScoredChunk, ...]]]:
    """The legal chunker's chunk holding each question's first gold span, as if it were retrieved alone."""
    chunker, chunks = LegalChunker(), {}
    for q in qs:
        g = q.gold[0]
        if g.doc not in chunks:
            chunks[g.doc] = chunker.chunk(load_document(corpus / g.doc))
        hit = next((c for c in chunks[g.doc] if c.char_start <= g.char_start < c.char_end), None)
        if hit is not None:
            yield q, (ScoredChunk(replace(hit, source_path=g.doc), 1.0, 1),)


def _span(ex: Excerpt) -> tuple[int, int]:
    return ex.start, ex.end


if __name__ == "__main__":
    main()
