"""Whole-query latency of the DEFAULT query path at 1x, 4x and 16x the legal_zh corpus, for questions
never asked before (cold) and then again (warm): issue 20 item 2 ("at 16x, p50 <= 2x the 1x figure").

    .venv/bin/python bench/query_scale.py [--scales 1,4,16] [--n 100] [--seed 0] [--vectors-from DIR]
                                          [--profile N]

What runs is what `rag ask` runs: Edge, RAG_RETRIEVAL_LEVERS=auto (rescore over BM25's top 20 with each
chunk's e5-onnx vector made at ingest, charge, colloquial, named), extractive answers, no reranker;
`warm_up()` first, as `rag serve` does (bench/query_latency.py is the same measurement at 1x only).
Questions are drawn at random from qa_dev (seeded), the same ones at every scale; each scale runs in a
fresh child process over a fresh data dir, so no question is cold at 1x and warm at 16x through an
in-process cache (levers and excerpt keep per-question lru_caches).

The 4x / 16x corpora are the real chunks replicated with distinct law titles (bench/store_scale.py's
`replicate`: `公司法（副本3）`, new doc and chunk ids, the title in the indexed text).
BENCH SHORTCUT: a replica's rescore vector is its original chunk's vector, written into the embedding
cache under the replica's indexed text (embedding 16x the corpus for real is ~35 min of CPU here).
Query latency depends on the vectors being there, not on their values; each pass counts the questions
whose retrieve row says "no vector yet" (rescore ran partly), which must be 0.
The originals' vectors come from one real embedding pass (rag_app/ingest/rescore_pass.py, ~2 min of CPU) or,
with --vectors-from, from a copy of an ingested data dir's embed_cache.sqlite (the dir is not modified).
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import CORPUS_ZH, QA_ZH, REPO, machine_line  # noqa: E402
from bench.store_scale import build_points, fill, replicate  # noqa: E402
from rag_app.config.settings import Settings  # noqa: E402
from tracing.ledger import percentile  # noqa: E402

WARM_UP_QUESTION = "公司法第五十七条"  # not a qa_dev question: loads jieba's dictionary


def default_settings(data_dir: Path) -> Settings:
    """What `rag ask` uses, offline: only the data dir, the extractive answer and no reranker are set."""
    return Settings(_env_file=None, data_dir=data_dir, llm_mode="extractive", rerank_model=None, store_backend="edge")


def draw_questions(n: int, seed: int) -> list[str]:
    rows = [json.loads(line) for line in QA_ZH.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r["question"] for r in random.Random(seed).sample(rows, n)]


# -- the stores ------------------------------------------------------------------------------------
def copy_cache(source: Path, dest: Path) -> None:
    """A copy of an embedding cache that never opens the source (opening it, even read-only, writes
    a -shm file beside it): the file and, when there is one, its WAL (writes not yet checkpointed),
    which the copy's first connection replays."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)
    wal = source.with_name(source.name + "-wal")
    if wal.is_file():
        shutil.copyfile(wal, dest.with_name(dest.name + "-wal"))


def parse_corpus(settings: Settings):
    from rag_app.chunking.registry import build_chunker
    from rag_app.ingest.indexing import expand_paths
    from rag_app.ingest.loaders import load_document

    chunker = build_chunker("legal", settings)
    files, _ = expand_paths([CORPUS_ZH])
    return chunker, [(d, chunker.chunk(d)) for d in map(load_document, files)]


def collection_info(settings: Settings, chunker, parsed):
    """The collection as `rag ingest` decides it offline (dense leg dropped for [UNK]s; BM25 + levers)."""
    from rag_app.models.embedding import load_embeddings
    from rag_app.ingest.indexing import decide_collection

    embeddings = load_embeddings(settings.embed_model, None)
    info = decide_collection(settings.collection, chunker, embeddings, [c for _, cs in parsed for c in cs],
                             settings.embed_max_unk_rate)
    if info.dense_enabled:  # the stores below are filled without dense vectors
        sys.exit(f"{settings.embed_model} keeps the dense leg on this corpus; this bench measures the offline "
                 "path (BM25 + levers): set RAG_EMBED_MODEL to the offline model")
    return info


def original_vectors(settings: Settings, info, parsed, vectors_from: Path | None) -> tuple[dict, str, int]:
    """Every original chunk's rescore vector by indexed text, the embedding cache's model key for them,
    and how many were embedded now."""
    from rag_app.query.levers import rescore_embeddings
    from rag_app.ingest.rescore_pass import chunk_texts, fill_rescore_vectors
    from rag_app.store import open_store

    if vectors_from is not None:
        copy_cache(vectors_from / "embed_cache.sqlite", settings.cache_path)
    fill(settings, info, build_points(parsed, info.avgdl))
    rescorer = rescore_embeddings(settings.rescore_model, settings.cache_path, required=True)
    with open_store(settings) as store:
        done = fill_rescore_vectors(store, info.name, rescorer)  # embeds only what the cache lacks
        texts = chunk_texts(store, info.name)
    vectors, _ = rescorer.cached_with_stats(texts)
    assert len(vectors) == len(texts), "rescore vectors missing after the embedding pass"
    return vectors, rescorer.cache_model, done.cache_misses


def build_scale(settings: Settings, info, parsed, scale: int, vectors: dict, model_key: str) -> int:
    """A data dir holding `scale` copies of the corpus and an embedding cache with each chunk's vector
    (copy 0's are the originals') under `model_key`, nothing else; returns the chunk count."""
    from rag_app.models.embedding_cache import EmbeddingCache

    copies = list(replicate(parsed, scale))
    fill(settings, info, build_points(copies, info.avgdl))
    replica = {}
    for (_, originals), (_, chunks) in zip(itertools.cycle(parsed), copies):
        for o, c in zip(originals, chunks):
            replica[c.indexed_text()] = vectors[o.indexed_text()]  # the shortcut: see the docstring
    EmbeddingCache(settings.cache_path).put_many(model_key, replica)
    return sum(len(cs) for _, cs in copies)


# -- one scale, in its own process -----------------------------------------------------------------
def measure(data_dir: Path, questions: list[str], profile: int = 0) -> dict:
    """Cold then warm pass; with `profile`, instead a cProfile of the cold pass over that many questions
    (the top functions by cumulative time, as text)."""
    from rag_app.app import RagApp

    settings = default_settings(data_dir)
    out: dict = {"levers": settings.retrieval_levers}
    with RagApp(settings) as app:
        app.warm_up()
        app.ask(WARM_UP_QUESTION)
        app.writer.flush()
        if profile:
            return {**out, "profile": profile_cold(app, questions[:profile])}
        for name in ("cold", "warm"):
            p: dict = {"whole": [], "retrieve": [], "partial": 0, "rescored": 0, "embedded": 0}
            cpu = time.process_time()
            for q in questions:
                t = time.perf_counter()
                answer = app.ask(q)
                p["whole"].append((time.perf_counter() - t) * 1000)
                retrieve = next(u for u in answer.usage if u.stage == "retrieve")
                p["retrieve"].append(retrieve.latency_ms)
                p["partial"] += bool(retrieve.note and "no vector yet" in retrieve.note)
                p["rescored"] += "rescore" in answer.levers
                p["embedded"] += bool(retrieve.cache_misses)  # a vector (the question's) made now: cold
            p["cpu"] = time.process_time() - cpu
            out[name] = p
    return out


def profile_cold(app, questions: list[str]) -> str:
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    for q in questions:
        app.ask(q)
    prof.disable()
    per_q = (time.perf_counter() - t) * 1000 / len(questions)
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(30)
    return f"{len(questions)} cold questions under cProfile: {per_q:.1f} ms each\n{buf.getvalue()}"


def run_child(data_dir: Path, n: int, seed: int, profile: int) -> dict:
    cmd = [sys.executable, __file__, "--child", str(data_dir), "--n", str(n), "--seed", str(seed),
           "--profile", str(profile)]
    res = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=REPO)
    if res.returncode:
        sys.exit(f"scale run in {data_dir} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def report(rows: list[tuple[int, int, dict]], n: int) -> None:
    first = min(rows)  # the smallest scale, whatever order they ran in
    base = {name: percentile(first[2][name]["whole"], 50) for name in ("cold", "warm")}
    print(f"\n{'scale':<6}{'chunks':>7} {'pass':<5}{'whole p50':>10}{'p95':>9}{'retr p50':>9}"
          f"{'x 1x':>7}{'CPU s':>7}{'resc':>6}{'emb':>5}{'part':>5}")
    for scale, chunks, r in rows:
        for name in ("cold", "warm"):
            p = r[name]
            w50 = percentile(p["whole"], 50)
            print(f"{str(scale) + 'x':<6}{chunks:>7} {name:<5}{w50:>10.1f}{percentile(p['whole'], 95):>9.1f}"
                  f"{percentile(p['retrieve'], 50):>9.1f}{w50 / base[name]:>6.2f}x{p['cpu']:>7.1f}"
                  f"{p['rescored']:>6}{p['embedded']:>5}{p['partial']:>5}")
    print(f"ms; x 1x: whole p50 / the {first[0]}x whole p50 of the same pass. Questions (of {n}): resc = "
          "rescore acted on, emb = embedded a vector then (cold), part = 'no vector yet' (must be 0)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scales", default="1,4,16")
    ap.add_argument("--n", type=int, default=100, help="questions, drawn at random from qa_dev")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vectors-from", type=Path, help="an ingested data dir whose embed_cache.sqlite to copy "
                    "(its rescore vectors; the dir is left as it is); default: one real embedding pass")
    ap.add_argument("--profile", type=int, default=0, help="instead of timing, cProfile the cold pass over "
                    "this many questions at each scale and print the top functions")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    print(machine_line())
    questions = draw_questions(args.n, args.seed)
    if args.child:
        print(json.dumps(measure(args.child, questions, args.profile)))
        return
    if args.vectors_from and not (args.vectors_from / "embed_cache.sqlite").is_file():
        sys.exit(f"--vectors-from {args.vectors_from}: no embed_cache.sqlite there; give an ingested data dir")
    scales = [int(x) for x in args.scales.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        originals = default_settings(root / "originals")
        chunker, parsed = parse_corpus(originals)
        info = collection_info(originals, chunker, parsed)
        t = time.perf_counter()
        vectors, model_key, embedded = original_vectors(originals, info, parsed, args.vectors_from)
        print(f"{len(questions)} questions drawn at random (seed {args.seed}) from {QA_ZH.name}; collection: "
              f"{info.dense_disabled_reason or 'dense'}; originals' rescore vectors: {len(vectors)} texts, "
              f"{embedded} embedded now ({time.perf_counter() - t:.0f} s)", flush=True)
        rows = []
        for scale in scales:
            settings = default_settings(root / f"{scale}x")
            chunks = build_scale(settings, info, parsed, scale, vectors, model_key)
            r = run_child(settings.data_dir, args.n, args.seed, args.profile)
            if args.profile:
                print(f"--- {scale}x ({chunks} chunks): {r['profile']}", flush=True)
                continue
            print(f"{scale}x: {chunks} chunks, levers {r['levers']}, cold whole p50 "
                  f"{percentile(r['cold']['whole'], 50):.1f} ms", flush=True)
            rows.append((scale, chunks, r))
            shutil.rmtree(settings.data_dir)
    if rows:
        report(rows, args.n)


if __name__ == "__main__":
    main()
