"""Where the default pipeline's misses are, and what each candidate view can reach.

Runs every question of a split through the product's default query path (the chain `rag eval` runs with
`--retriever default`, same collection), and alongside it every candidate view of
rag_app/query/views.py. Prints, per task:

1. the miss split within the budget (the product's rule, crossing chunk cut): found / ranking miss (a gold
   among the candidates the default fusion saw: its BM25 leg's top 50, cited articles, charge chunks) /
   candidate miss (in none of them). `found` equals `rag eval`'s recall within the budget.
2. each view's candidate recall at the depths (and the union of all views, and the default's pool).

    RAG_DATA_DIR=.rag python bench/miss_split.py --qa $RAG_SHARED_DIR/data/legal_zh/qa_dev.jsonl \
        --corpus $RAG_SHARED_DIR/data/legal_zh/corpus --split tune --out bench/out/miss_tune.json \
        --views-out bench/out/views_tune.jsonl

`--views-out` keeps each question's views (chunk id, score, and the span the hit rule reads) for
re-scoring and for training a ranker without re-running retrieval.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import CORPUS_ZH, QA_ZH, machine_line  # noqa: E402


# unions of views reported whole (None: every view)
UNIONS = {"all views": None, "bm25+colloquial, dense": ("bm25+colloquial", "dense"),
          "bm25+colloquial, dense, cite, charge, named": ("bm25+colloquial", "dense", "cite", "charge", "named")}


def _fmt(ci: dict) -> str:
    return f"{ci['mean']:.3f} [{ci['ci95_low']:.3f}, {ci['ci95_high']:.3f}]"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qa", type=Path, default=QA_ZH)
    ap.add_argument("--corpus", type=Path, default=CORPUS_ZH)
    ap.add_argument("--split", default="tune", help="tune | validate | all")
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--depths", default="20,50,100")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None, help="the tables as JSON")
    ap.add_argument("--views-out", type=Path, default=None, help="each question's views, one JSON line each")
    a = ap.parse_args(argv)

    from chains.rag import build_rag
    from rag_app.app import RagApp
    from rag_app.config.settings import check_data_dir, load_settings
    from rag_app.core.types import Chunk
    from rag_app.evaluation.candidates import miss_table, split_misses, view_recall
    from rag_app.evaluation.harness import (DEFAULT_RETRIEVER, EvalSpec, eval_collection, eval_documents,
                                            eval_questions, query_config, ranked_of)
    from rag_app.evaluation.hits import Ranked
    from rag_app.query.levers import levers_for
    from rag_app.query.views import candidate_views, default_pool

    depths = [int(d) for d in a.depths.split(",")]
    settings = load_settings()
    check_data_dir(settings.data_dir)
    spec = EvalSpec(qa=a.qa, corpus=a.corpus, chunkers=["legal"], split=None if a.split == "all" else a.split,
                    limit=a.limit)
    questions = eval_questions(spec)
    docs, rel = eval_documents(spec)
    with RagApp(settings) as app:
        top_k = max(settings.top_k, 10)  # as run_eval: max(RAG_TOP_K, the largest recall cut-off)
        config = query_config(app, spec, DEFAULT_RETRIEVER, top_k)
        cname, info, _ = eval_collection(app, spec, "legal", docs, config.retriever in ("dense", "hybrid"))
        levers = levers_for(config.retrieval_levers, info)
        chain = build_rag(app.pipeline(config, info, rescore_required="rescore" in levers))
        rescorer = app.rescorer(required=True)
        pool_depth = max(top_k * 2, config.depth)

        def as_ranked(payload: dict, score: float) -> Ranked:
            c = Chunk.from_payload(payload)
            return Ranked(rel[c.source_path], c.char_start, c.char_end, c.token_count, score, c.text)

        splits, per_q_views, outside, t0 = [], [], 0, time.perf_counter()
        sizes: dict[str, list[int]] = defaultdict(list)
        out = a.views_out.open("w", encoding="utf-8") if a.views_out else None
        for i, q in enumerate(questions, 1):
            answer = chain.invoke({"question": q.question, "scope": None},
                                  config={"metadata": {"query_id": f"miss-{q.id}"}})
            ranking = ranked_of(answer, rel)
            v = candidate_views(app.store, info, q.question, depth=max(depths), embeddings=rescorer,
                                params=config)
            pool = default_pool(v, pool_depth, top_k)
            outside += sum(h.chunk.chunk_id not in pool for h in answer.ranked)
            splits.append(split_misses(q, ranking, [as_ranked(v.payloads[c], 0.0) for c in pool], a.budget))
            views = {name: [as_ranked(v.payloads[c], s) for c, s in lst] for name, lst in v.ranked.items()}
            for d in depths:  # what views together propose: the union of each one's top d
                for label, names in UNIONS.items():
                    seen: dict[str, None] = {}
                    for name in names or v.ranked:
                        seen.update(dict.fromkeys(c for c, _ in v.ranked.get(name, [])[:d]))
                    views[f"{label} top {d}"] = [as_ranked(v.payloads[c], 0.0) for c in seen]
                    sizes[f"{label} top {d}"].append(len(seen))
            sizes["default pool"].append(len(pool))
            per_q_views.append(views)
            if out:
                out.write(json.dumps({"qid": q.id, "task": q.task, "views": v.ranked,
                                      "default_pool": sorted(pool), "default_ranking": [h.chunk.chunk_id for h in answer.ranked],
                                      "spans": {c: [rel[Chunk.from_payload(p).source_path], p["char_start"], p["char_end"]]
                                                for c, p in v.payloads.items()}}, ensure_ascii=False) + "\n")
            if i % 20 == 0:
                print(f"  {i}/{len(questions)} questions, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        if out:
            out.close()
    misses = miss_table(questions, splits)
    unions = [f"{label} top {d}" for d in depths for label in UNIONS]
    recall = view_recall(questions, per_q_views, depths, whole=unions)
    print(machine_line())
    print(f"{len(questions)} questions (split {a.split}), collection {cname}, levers {'+'.join(levers)}; "
          f"ranked chunks outside the pool the views rebuild: {outside} (0 = the pool is what fusion saw)")
    print(f"\nMiss split within {a.budget} context tokens (share of gold per question, 95% CI):")
    print(f"{'task':28} {'n':>4}  {'found':24} {'ranking miss':24} {'candidate miss':24}")
    for r in misses:
        print(f"{r['task']:28} {r['n']:>4}  {_fmt(r['found']):24} {_fmt(r['ranking_miss']):24} "
              f"{_fmt(r['candidate_miss']):24}")
    print("\nCandidate recall by view, recall@" + "/".join(map(str, depths)) + " (share of gold in the view's top k):")
    views_seen = list(dict.fromkeys(k.rsplit("@", 1)[0] for k in recall[0] if k not in ("task", "n")))
    print("| view | " + " | ".join(f"{r['task']} ({r['n']})" for r in recall) + " |")
    print("|---" * (len(recall) + 1) + "|")
    for name in views_seen:
        if name in unions:
            cells = [f"{r[name]:.3f}" for r in recall]
        else:
            cells = [" / ".join(f"{r[f'{name}@{d}']:.3f}" for d in depths) for r in recall]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\nMean candidates per question: " + ", ".join(f"{k} {sum(v) / len(v):.0f}" for k, v in sizes.items()))
    result = {"split": a.split, "budget": a.budget, "questions": len(questions), "collection": cname,
              "levers": list(levers), "outside_pool": outside, "miss_split": misses, "view_recall": recall,
              "mean_candidates": {k: round(sum(v) / len(v), 1) for k, v in sizes.items()}}
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, ensure_ascii=False, indent=1))
    return result


if __name__ == "__main__":
    main()
