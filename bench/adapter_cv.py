"""Choosing the query adapter on `tune` the way held-out questions behave: grouped k-fold cross-validation
with the folds grouped by each question's first gold article, so a fold is ranked with an adapter that never
saw its articles (held-out questions share no primary gold article with qa_dev). Each fold runs through
the whole query chain `rag eval --retriever default` runs, its questions' vectors moved by that fold's
adapter, paired against the same chain with no adapter. Then, once chosen, `--report-on validate`: an adapter
trained on all of `--split`, reported once, by task and on the questions whose first gold is no `--split`
question's gold.

    RAG_DATA_DIR=.rag python bench/adapter_cv.py --split tune --folds 5
    RAG_DATA_DIR=.rag python bench/adapter_cv.py --split tune --variants default --report-on validate
"""
from __future__ import annotations

import hashlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import cv_arguments, machine_line, paired_report  # noqa: E402

# the chains compared, each with and without the adapter: the default levers, and the default with `wide`
# (the whole-corpus dense view's nearest chunks join BM25's; with raw e5 it gained nothing, below)
VARIANTS = {"default": "default", "wide": "bm25+rescore+wide+charge+colloquial+named"}


def fold_of(q, folds: int) -> int:
    g = q.gold[0]
    return int(hashlib.sha256(f"adapter-cv|{g.doc}|{g.char_start}".encode()).hexdigest(), 16) % folds


def main(argv: list[str] | None = None) -> dict:
    ap = cv_arguments(__doc__.splitlines()[0])
    ap.add_argument("--variants", default="default,wide", help=f"of {', '.join(VARIANTS)} or a lever list "
                    "(e.g. bm25+rescore+wide+law), each optionally @lever_param=value,... (e.g. wide@rescore_weight=2)")
    ap.add_argument("--l2", default="0.01", help="the fit's L2 weights to compare (comma-separated)")
    ap.add_argument("--pseudo", type=int, default=0, help="pseudo-questions mined from the corpus (article "
                    "openings, as `rag train-ranker` mines them) added to every fold's training questions")
    ap.add_argument("--mined", type=int, default=0, help="pairs mined from the corpus's text (rag_app/evaluation/"
                    "mined_pairs.py) added to every fold's training questions")
    ap.add_argument("--mined-kinds", default="definition,crossref,heading", help="which kinds of mined pairs")
    ap.add_argument("--unit", default=None, choices=["chunk", "article"], help="the view the adapters are fitted "
                    "over (a chunk as its own vector or as its best article); default RAG_RESCORE_UNIT")
    ap.add_argument("--base", default="default", help="the chain every variant is paired against (a --variants "
                    "entry: e.g. the stack without its adapter), run with no adapter")
    ap.add_argument("--base-adapter", default="", help="an adapter for --base: `folds` (each fold's own, as the "
                    "variants get) or an .npz path; default none")
    ap.add_argument("--per-question-out", type=Path, default=None, help="write each question's recall within the "
                    "budget, per chain, as JSON (to pair two runs of this bench afterwards)")
    ap.add_argument("--report-on", default=None, help="after choosing: train on all of --split (first --variants, "
                    "first --l2) and report once on this split (e.g. validate), paired against the default")
    a = ap.parse_args(argv)

    from chains.rag import build_rag
    from rag_app.app import RagApp
    from rag_app.config.settings import check_data_dir, load_settings
    from rag_app.evaluation.adapter_train import Corpus, adapt, dense_recall, fit, question_vectors
    from rag_app.evaluation.ranker_train import pseudo_questions
    from rag_app.evaluation.harness import (DEFAULT_RETRIEVER, EvalSpec, eval_collection, eval_documents,
                                            eval_questions, query_config, ranked_of)
    from rag_app.query.adapter import load_adapter, save_adapter
    from rag_app.query.knobs import lever_overrides

    settings = load_settings()
    check_data_dir(settings.data_dir)
    spec = EvalSpec(qa=a.qa, corpus=a.corpus, chunkers=["legal"], split=a.split)
    questions = eval_questions(spec)
    docs, rel = eval_documents(spec)
    variants = a.variants.split(";") if ";" in a.variants else a.variants.split(",")
    l2s = [float(x) for x in a.l2.split(",")]
    out: dict = {}
    print(machine_line())
    with RagApp(settings) as app, tempfile.TemporaryDirectory() as tmp:
        top_k = max(settings.top_k, 10)
        _, info, _ = eval_collection(app, spec, "legal", docs, False)
        rescorer = app.rescorer(required=True)
        unit = a.unit or settings.rescore_unit
        corpus = Corpus.of(app.store, info.name, rescorer, rel, unit)
        max_chars = app.query_config().rescore_query_chars
        vectors = question_vectors(questions, rescorer, max_chars)
        golds = [corpus.gold_rows(q) for q in questions]
        mined = pseudo_questions(app.store.all_payloads(info.name), rel, a.pseudo) if a.pseudo else []
        if a.mined:  # pairs mined from the corpus's text (definitions, cross-references, headings)
            from rag_app.evaluation.mined_pairs import mine

            mined += mine([(rel[d.source_path], d.text) for d in docs], a.mined, kinds=tuple(a.mined_kinds.split(",")))
        mined_vectors = question_vectors(mined, rescorer, max_chars) if mined else vectors[:0]
        mined_golds = [corpus.gold_rows(q) for q in mined]

        def chain(variant: str, adapter: str):
            name, _, overrides = variant.partition("@")  # e.g. wide@rescore_weight=2,wide_depth=50
            levers = DEFAULT_RETRIEVER if name == "default" else VARIANTS.get(name, name)
            config = query_config(app, spec, levers, top_k)
            params = lever_overrides([kv for kv in overrides.split(",") if kv], f"--variants {variant!r}")
            config = config.with_(query_adapter=adapter, **params)
            return build_rag(app.pipeline(config, info, rescore_required=True))

        def rank(qs, variant: str, adapter: str):
            c = chain(variant, adapter)
            return [ranked_of(c.invoke({"question": q.question, "scope": None}), rel) for q in qs]

        def adapter_file(idx: list[int], l2: float, name: str) -> str:
            import numpy as np

            W = fit(np.concatenate([vectors[idx], mined_vectors]), [golds[i] for i in idx] + mined_golds,
                    corpus.view, l2=l2)
            record = {"version": name, "model": rescorer.model_name, "kind": "query-adapter (bench fold)"}
            return str(save_adapter(W, record, Path(tmp)))

        fold = [fold_of(q, a.folds) for q in questions]
        print(f"{len(questions)} questions ({a.split}), {a.folds} folds grouped by first gold article, "
              f"{len(corpus.ids):,} chunks, adapters fitted over the {unit} view")
        lay = [i for i, q in enumerate(questions) if q.task == "layperson_consultation"]
        files_of: dict[float, list[str]] = {}

        def fold_files(l2: float) -> list[str]:
            if l2 not in files_of:
                files_of[l2] = [adapter_file([i for i, f in enumerate(fold) if f != k], l2, f"cv{k}-{l2}")
                                for k in range(a.folds)]
            return files_of[l2]

        def out_of_fold(variant: str, files: list[str]) -> list:
            ranked: list = [None] * len(questions)
            for k in range(a.folds):
                idx = [i for i, f in enumerate(fold) if f == k]
                for i, r in zip(idx, rank([questions[i] for i in idx], variant, files[k])):
                    ranked[i] = r
            return ranked

        base = (out_of_fold(a.base, fold_files(l2s[0])) if a.base_adapter == "folds"
                else rank(questions, a.base, a.base_adapter))
        per_question: dict[str, list[float]] = {}

        def dense_line(title: str, qv) -> None:
            cells = [" / ".join(f"{dense_recall(qv[idx], [golds[i] for i in idx], corpus.view, k):.3f}"
                                for k in (5, 20, 50)) for idx in (list(range(len(questions))), lay)]
            print(f"  dense view, whole collection, recall@5/20/50, {title}: all {cells[0]}; layperson {cells[1]}")

        print(f"\nthe view the adapter changes ({len(mined)} pseudo-questions in each fold's training):")
        dense_line("e5 as is", vectors)
        for l2 in l2s:
            files = fold_files(l2)
            moved = vectors.copy()
            for k in range(a.folds):
                idx = [i for i, f in enumerate(fold) if f == k]
                moved[idx] = adapt(vectors[idx], load_adapter(files[k]).matrix)
            dense_line(f"adapter l2 {l2}, out of fold", moved)
            for variant in variants:
                t0 = time.perf_counter()
                ranked = out_of_fold(variant, files)
                title = f"{variant} + adapter (l2 {l2}), {a.split} out of fold ({time.perf_counter() - t0:.0f} s)"
                out[(variant, l2)] = paired_report(questions, base, ranked, a.budget, title)
                per_question[f"{variant} + adapter (l2 {l2})"] = out[(variant, l2)]["per_question"]["new"]
                if variant != a.base:
                    out[(variant, None)] = paired_report(questions, base, rank(questions, variant, ""), a.budget,
                                                         f"{variant}, no adapter, {a.split}")
                    per_question[variant] = out[(variant, None)]["per_question"]["new"]
        if out:
            per_question[f"base: {a.base} ({a.base_adapter or 'no adapter'})"] = next(iter(out.values()))["per_question"]["default"]
        if a.per_question_out:
            import json

            a.per_question_out.write_text(json.dumps({"split": a.split, "ids": [q.id for q in questions],
                                                      "within": a.budget, "chains": per_question}, indent=1))
        if a.report_on:
            held = eval_questions(EvalSpec(qa=a.qa, corpus=a.corpus, chunkers=["legal"], split=a.report_on))
            seen = {(g.doc, g.char_start) for q in questions for g in q.gold}
            unseen = {q.id for q in held if (q.gold[0].doc, q.gold[0].char_start) not in seen}
            path = adapter_file(list(range(len(questions))), l2s[0], "report")
            held_base = rank(held, a.base, path if a.base_adapter == "folds" else a.base_adapter)
            out["report"] = paired_report(held, held_base, rank(held, variants[0], path), a.budget,
                                          f"REPORTED ONCE on {a.report_on}: {variants[0]} + adapter trained on all "
                                          f"of {a.split} (l2 {l2s[0]}), against {a.base}", unseen=unseen)
            out["pooled"] = pooled(questions, out[(variants[0], l2s[0])], held, out["report"], a)
    return out


def pooled(chosen_on, oof: dict, held, report: dict, a) -> dict:
    """The same comparison over both splits' questions at once: `--split` out of fold and the reported split.
    More questions, narrower intervals; it is no second read of the reported split (the same rankings), and
    the default-change rule reads the reported split alone (docs/evaluation-and-levers.md)."""
    from rag_app.evaluation.stats import paired_diff_ci

    questions = [*chosen_on, *held]
    base = oof["per_question"]["default"] + report["per_question"]["default"]
    new = oof["per_question"]["new"] + report["per_question"]["new"]
    out = {}
    for group, idx in (("all", list(range(len(questions)))),
                       ("layperson", [i for i, q in enumerate(questions) if q.task == "layperson_consultation"])):
        if not idx:  # e.g. no layperson question in a small sample
            continue
        d = paired_diff_ci([base[i] for i in idx], [new[i] for i in idx])
        out[group] = d
        print(f"pooled, {a.split} out of fold + {a.report_on} ({len(idx)} questions), {group}: "
              f"{d['diff']:+.3f} [{d['ci95_low']:+.3f}, {d['ci95_high']:+.3f}]")
    return out


if __name__ == "__main__":
    main()
