"""How many marked answers it takes to move `validate`: `tune` questions turned into feedback, as a live
service would collect it, then adapters trained from that feedback (`rag train-adapter --from-feedback`'s
fit) and scored once on `validate` through the whole query chain, paired against the new default (its
adapter trained on `tune`'s gold labels) and against no adapter.

How an answer becomes feedback here: each `tune` question is answered by the default chain with no adapter
(what a fresh install without the bundled one answers: no answer has seen its question's gold); the answer's
citations are what the ledger records (query_citations); a scripted user who knows the gold marks it right
when a cited passage covers a gold span, else wrong. `--cite all` (the default) keeps every citation, as the
extractive answer cites every passage it shows; `--cite first` keeps only the first, closer to an LLM that
cites the passage it used.

Scenarios, each for N = --sizes marked answers (a seeded sample of tune):
  feedback alone     an adapter from N marked answers and nothing else
  labels + feedback  half of tune's gold labels (fold A) plus N marked answers from the other half (fold B),
                     against fold A's labels alone and against fold A + fold B's gold labels

    RAG_DATA_DIR=.rag python bench/feedback_curve.py --sizes 40,80,160,320 [--cite all|first]
"""
from __future__ import annotations

import hashlib
import random
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import cv_arguments, machine_line, paired_report  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    ap = cv_arguments(__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="40,80,160,320", help="how many marked answers each adapter learns from")
    ap.add_argument("--cite", default="all", choices=["all", "first"], help="which citations a marked answer keeps")
    ap.add_argument("--report-on", default="validate")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dense-only", action="store_true", help="the dense view's recall only (seconds), no chain runs")
    a = ap.parse_args(argv)

    import numpy as np

    from chains.rag import build_rag
    from rag_app.app import RagApp
    from rag_app.config.settings import check_data_dir, load_settings
    from rag_app.evaluation.adapter_train import Corpus, adapt, dense_recall, fit, question_vectors
    from rag_app.evaluation.feedback_pairs import Feedback, Marked
    from rag_app.evaluation.harness import (DEFAULT_RETRIEVER, EvalSpec, eval_collection, eval_documents,
                                            eval_questions, query_config, ranked_of)
    from rag_app.evaluation.hits import covers
    from rag_app.query.adapter import save_adapter

    settings = load_settings()
    check_data_dir(settings.data_dir)
    spec = EvalSpec(qa=a.qa, corpus=a.corpus, chunkers=["legal"], split=a.split)
    tune = eval_questions(spec)
    held = eval_questions(replace(spec, split=a.report_on))
    docs, rel = eval_documents(spec)
    print(machine_line())
    out: dict = {}
    with RagApp(settings) as app, tempfile.TemporaryDirectory() as tmp:
        _, info, _ = eval_collection(app, spec, "legal", docs, False)
        rescorer = app.rescorer(required=True)
        corpus = Corpus.of(app.store, info.name, rescorer, rel, settings.rescore_unit)
        max_chars = app.query_config().rescore_query_chars
        top_k = max(settings.top_k, 10)

        def chain(adapter: str):
            config = query_config(app, spec, DEFAULT_RETRIEVER, top_k)
            return build_rag(app.pipeline(config.with_(query_adapter=adapter),
                                          info, rescore_required=True))

        t0 = time.perf_counter()
        answering = chain("")
        marked: list = []
        for q in tune:  # each tune question answered and marked, as the ledger and a user would
            answer = answering.invoke({"question": q.question, "scope": None})
            cited = [(c.chunk_id, c.doc, c.char_start, c.char_end) for c in answer.citations]
            right = any(covers(rel.get(d, d), s, e, g) for _, d, s, e in cited for g in q.gold)
            marked.append(Marked(q.question, 1 if right else -1, tuple(cited[:1] if a.cite == "first" else cited)))
        rate = sum(m.score > 0 for m in marked) / len(marked)
        print(f"{len(tune)} {a.split} questions answered and marked in {time.perf_counter() - t0:.0f} s: "
              f"{rate:.3f} marked right (citations kept: {a.cite})")

        vectors = question_vectors(tune, rescorer, max_chars)
        golds = [corpus.gold_rows(q) for q in tune]
        held_vectors = question_vectors(held, rescorer, max_chars)
        d = vectors.shape[1]
        held_golds = [corpus.gold_rows(q) for q in held]
        lay = [i for i, q in enumerate(held) if q.task == "layperson_consultation"]

        def adapter(name: str, idx_labels: list[int], idx_feedback: list[int]) -> tuple[str, np.ndarray]:
            fb = Feedback(tuple(marked[i] for i in idx_feedback), "simulated")
            v_fb, g_fb, n_fb, _ = fb.examples(corpus, rescorer, max_chars) if idx_feedback else (
                vectors[:0], [], [], {})
            V = np.concatenate([x for x in (vectors[idx_labels], v_fb) if x.size]) if (idx_labels or idx_feedback) \
                else vectors[:0]
            W = fit(V, [golds[i] for i in idx_labels] + g_fb, corpus.view,
                    negatives=[[] for _ in idx_labels] + n_fb) if len(V) else np.zeros((d, d), np.float32)
            path = save_adapter(W, {"version": name, "model": rescorer.model_name}, Path(tmp))
            return str(path), W

        def dense(W) -> str:
            moved = adapt(held_vectors, W)
            cells = []
            for idx in (list(range(len(held))), lay):
                cells.append(" / ".join(f"{dense_recall(moved[idx], [held_golds[i] for i in idx], corpus.view, k):.3f}"
                                        for k in (5, 20)))
            return f"dense recall@5/20 all {cells[0]}, layperson {cells[1]}"

        def ranked(path: str):
            c = chain(path)
            return [ranked_of(c.invoke({"question": q.question, "scope": None}), rel) for q in held]

        order = list(range(len(tune)))
        random.Random(a.seed).shuffle(order)
        fold_a = [i for i in order if int(hashlib.sha256(tune[i].id.encode()).hexdigest(), 16) % 2 == 0]
        fold_b = [i for i in order if i not in set(fold_a)]
        sizes = [int(x) for x in a.sizes.split(",")]
        labelled_path, labelled_W = adapter("labels-tune", list(range(len(tune))), [])
        print(f"\nreference adapters on {a.report_on} ({len(held)} questions):")
        print(f"  no adapter: {dense(np.zeros_like(labelled_W))}")
        print(f"  tune's {len(tune)} gold labels (the default's adapter on {a.report_on}): {dense(labelled_W)}")
        base = None if a.dense_only else ranked(labelled_path)
        none = None if a.dense_only else ranked("")
        if not a.dense_only:
            out["none"] = paired_report(held, base, none, a.budget, f"no adapter vs the default ({a.report_on})")
        print("\nfeedback alone:")
        for n in sizes:
            if n > len(order):
                continue
            path, W = adapter(f"fb{n}", [], order[:n])
            pos = sum(marked[i].score > 0 for i in order[:n])
            print(f"  {n} marked answers ({pos} right, {n - pos} wrong): {dense(W)}")
            if not a.dense_only:
                out[("alone", n)] = paired_report(held, base, ranked(path), a.budget,
                                                  f"{n} marked answers alone vs the default ({a.report_on})")
        print(f"\nlabels + feedback: fold A ({len(fold_a)} labelled tune questions) + N marked answers of fold B "
              f"({len(fold_b)}):")
        a_path, a_W = adapter("labels-A", fold_a, [])
        print(f"  fold A's labels alone: {dense(a_W)}")
        ab_path, ab_W = adapter("labels-AB", fold_a + fold_b, [])
        print(f"  fold A + fold B's gold labels: {dense(ab_W)}")
        a_ranked = None if a.dense_only else ranked(a_path)
        if not a.dense_only:
            out["A"] = paired_report(held, base, a_ranked, a.budget, "fold A's labels alone vs the default")
        for n in sizes:
            if n > len(fold_b):
                n = len(fold_b)
            path, W = adapter(f"A+fb{n}", fold_a, fold_b[:n])
            print(f"  fold A + {n} marked answers of fold B: {dense(W)}")
            if not a.dense_only:
                out[("A+", n)] = paired_report(held, a_ranked, ranked(path), a.budget,
                                               f"fold A + {n} marked answers vs fold A alone")
            if n == len(fold_b):
                break
    return out


if __name__ == "__main__":
    main()
