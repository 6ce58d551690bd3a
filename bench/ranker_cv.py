"""Choosing the learned ranker on `tune` without measuring it on what it learned from: grouped k-fold
cross-validation over the split's questions. Each fold's questions are ranked by a model trained on the
other folds (plus the corpus's pseudo-questions), so every figure is out of fold. Compared, paired, with
the default pipeline's own ranking of the same questions (the chain `rag eval --retriever default` runs).

    RAG_DATA_DIR=.rag python bench/ranker_cv.py --split tune --pseudo 0,1000 --folds 5
    RAG_DATA_DIR=.rag python bench/ranker_cv.py --split tune --pseudo 0 --objective lambdarank --report-on validate
"""
from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import cv_arguments, machine_line, paired_report  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    ap = cv_arguments(__doc__.splitlines()[0])
    ap.add_argument("--pool-depth", type=int, default=50)
    ap.add_argument("--pseudo", default="0,1000", help="pseudo-question counts to compare")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--objective", choices=("pointwise", "lambdarank"), default="pointwise",
                    help="pointwise: the lever's classifier; lambdarank: LightGBM's listwise ranker (pip install lightgbm)")
    ap.add_argument("--report-on", default=None, help="after choosing: train on all of --split (with the first "
                    "--pseudo count) and report once on this split (e.g. validate), paired against the default")
    ap.add_argument("--model-order-only", action="store_true",
                    help="rank by the model alone (the lever puts the cited article and charges' chunks first)")
    a = ap.parse_args(argv)

    from chains.rag import build_rag
    from rag_app.app import RagApp
    from rag_app.config.settings import check_data_dir, load_settings
    from rag_app.evaluation.budget import recall_of, recall_within
    from rag_app.evaluation.harness import (DEFAULT_RETRIEVER, EvalSpec, eval_collection, eval_documents,
                                            eval_questions, query_config, ranked_of)
    from rag_app.evaluation.ranker_train import collect, fit, order_by, pseudo_questions
    from rag_app.evaluation.stats import mean_ci
    from rag_app.query.levers import levers_for

    settings = load_settings()
    check_data_dir(settings.data_dir)
    spec = EvalSpec(qa=a.qa, corpus=a.corpus, chunkers=["legal"], split=a.split, limit=a.limit)
    questions = eval_questions(spec)
    docs, rel = eval_documents(spec)
    with RagApp(settings) as app:
        top_k = max(settings.top_k, 10)
        config = query_config(app, spec, DEFAULT_RETRIEVER, top_k)
        cname, info, _ = eval_collection(app, spec, "legal", docs, config.retriever in ("dense", "hybrid"))
        levers = levers_for(config.retrieval_levers, info)
        chain = build_rag(app.pipeline(config, info, rescore_required="rescore" in levers))
        rescorer = app.rescorer(required=True)
        t0 = time.perf_counter()
        default = [ranked_of(chain.invoke({"question": q.question, "scope": None}), rel) for q in questions]
        t_default = time.perf_counter() - t0
        t0 = time.perf_counter()
        samples = collect(app.store, info, questions, rel, rescorer, config, a.pool_depth)
        t_feat = time.perf_counter() - t0
        max_pseudo = max(int(n) for n in a.pseudo.split(","))
        pseudo_qs = pseudo_questions(app.store.all_payloads(info.name), rel, max_pseudo)
        pseudo = collect(app.store, info, pseudo_qs, rel, rescorer, config, a.pool_depth)
        if a.report_on:
            held = eval_questions(EvalSpec(qa=a.qa, corpus=a.corpus, chunkers=["legal"], split=a.report_on,
                                           limit=a.limit))
            held_default = [ranked_of(chain.invoke({"question": q.question, "scope": None}), rel) for q in held]
            held_samples = collect(app.store, info, held, rel, rescorer, config, a.pool_depth)
    fold = [int(hashlib.sha256(f"ranker-cv|{q.id}".encode()).hexdigest(), 16) % a.folds for q in questions]
    print(machine_line())
    print(f"{len(questions)} questions ({a.split}), {a.folds} folds, pool = every view's top {a.pool_depth} "
          f"(mean {sum(len(s.ids) for s in samples) / len(samples):.0f} candidates); default chain "
          f"{t_default:.0f} s, features {t_feat:.0f} s, {len(pseudo)} pseudo-questions mined")
    base = [recall_within(q, r, a.budget) for q, r in zip(questions, default)]
    ceiling = [recall_of(q, s.ranked) for q, s in zip(questions, samples)]
    print(f"default within {a.budget}: {mean_ci(base)['mean']:.3f}; pool ceiling {sum(ceiling) / len(ceiling):.3f}")
    trainer = fit if a.objective == "pointwise" else fit_lambdarank
    results = {}
    for n in [int(x) for x in a.pseudo.split(",")]:
        t0 = time.perf_counter()
        ranked = [None] * len(questions)
        for k in range(a.folds):
            train = [s for s, f in zip(samples, fold) if f != k] + pseudo[:n]
            model = trainer(train)
            for i, (s, f) in enumerate(zip(samples, fold)):
                if f == k:
                    ranked[i] = order_by(model, s, first=not a.model_order_only)[:top_k]
        fit_s = (time.perf_counter() - t0) / a.folds
        results[n] = paired_report(questions, default, ranked, a.budget, f"ranker, {n} pseudo-questions (fit "
                                   f"{fit_s:.1f} s a fold), {a.split} out of fold", label="ranker")
    if a.report_on:
        n = int(a.pseudo.split(",")[0])
        model = trainer(samples + pseudo[:n])
        ranked = [order_by(model, s, first=not a.model_order_only)[:top_k] for s in held_samples]
        results["report"] = paired_report(held, held_default, ranked, a.budget, f"REPORTED ONCE on {a.report_on}, "
                                          f"trained on all of {a.split} + {n} pseudo-questions ({a.objective})",
                                          label="ranker")
    return results



class _Scores:
    """A ranker's scores where order_by expects a classifier's probabilities (column 1)."""

    def __init__(self, model):
        self.model = model

    def predict_proba(self, X):
        import numpy as np

        s = self.model.predict(X)
        return np.column_stack([-s, s])


def fit_lambdarank(samples, seed: int = 7):
    """LightGBM's LambdaMART over each question's pool as one group: it learns the order within a
    question (what recall within a budget reads), not P(gold) over all candidates pooled."""
    import numpy as np

    try:
        import lightgbm as lgb
    except ImportError:
        raise SystemExit("--objective lambdarank needs LightGBM: pip install lightgbm") from None

    kept = [s for s in samples if len(s.ids)]
    X = np.concatenate([s.X for s in kept])
    y = np.concatenate([s.y for s in kept]).astype(int)
    model = lgb.LGBMRanker(objective="lambdarank", n_estimators=300, learning_rate=0.05, num_leaves=15,
                           min_child_samples=40, reg_lambda=1.0, random_state=seed, n_jobs=1, verbose=-1)
    model.fit(X, y, group=[len(s.ids) for s in kept])
    return _Scores(model)


if __name__ == "__main__":
    main()
