"""Retrieve and whole-query latency (extractive, no LLM; BM25 as offline) at 1x, 4x and 16x the
legal_zh corpus, Qdrant Edge against qdrant-client's local mode (the store of earlier versions)
in the same run, plus the peak RSS of `rag serve` on the largest store.

The 4x / 16x corpora are the chunks of the real corpus replicated with distinct law titles
(`公司法（副本3）`, new doc ids and chunk ids, the title in the indexed text), built in a temp dir.
Latencies are read from the ledger the CostTracer writes (stage `retrieve`, whole query).

    .venv/bin/python bench/store_scale.py [--scales 1,4,16] [--n 100] [--baseline-n 20]
                                          [--baseline-scales 1,4,16] [--rss]

This times the store (levers off, questions in file order); the default query path at the same scales,
levers on and questions drawn at random, cold then warm, is bench/query_scale.py.

Local mode takes minutes per query batch at 16x (and its fill ~20 min on 2 cores): the README
figures ran it at 1x (and 1x, 4x in an earlier run) with `--baseline-scales`.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import CORPUS_ZH, QA_ZH, REPO, machine_line  # noqa: E402
from rag_app.text import sparse  # noqa: E402
from rag_app.app import RagApp  # noqa: E402
from rag_app.chunking.registry import build_chunker  # noqa: E402
from rag_app.config.settings import Settings  # noqa: E402
from rag_app.ingest.indexing import expand_paths  # noqa: E402
from rag_app.ingest.loaders import load_document  # noqa: E402
from rag_app.store import CollectionInfo, SparseVector, StoredPoint, open_store  # noqa: E402
from tracing.ledger import percentile  # noqa: E402


def replicate(parsed, copies: int):
    """Copy j of every document: its own title, doc id and chunk ids; copy 0 is the original."""
    for j in range(copies):
        for doc, chunks in parsed:
            if j == 0:
                yield doc, chunks
                continue
            title = f"{doc.title}（副本{j}）"
            d = replace(doc, doc_id=f"{doc.doc_id}~{j}", content_hash=f"{doc.content_hash}~{j}", title=title)
            yield d, [replace(c, doc_id=d.doc_id, title=title,
                              chunk_id=str(uuid.uuid5(uuid.UUID(c.chunk_id), str(j)))) for c in chunks]


def bm25_corpus() -> tuple[list, float, CollectionInfo]:
    """legal_zh parsed and chunked as ingest does, its BM25 mean length, and a BM25-only collection's info
    (the dense leg is dropped offline): what the store benches write, at any scale."""
    settings = Settings(_env_file=None)
    chunker = build_chunker("legal", settings)
    files, _ = expand_paths([CORPUS_ZH])
    parsed = [(d, chunker.chunk(d)) for d in map(load_document, files)]
    texts = [c.indexed_text() for _, cs in parsed for c in cs]
    avgdl = round(sparse.mean_length(texts[:: max(1, len(texts) // 300)]), 2)
    info = CollectionInfo(name="legal", embed_model=settings.embed_model, dimension=384, dense_enabled=False,
                          unk_rate=0.62, avgdl=avgdl, chunker=f"{chunker.name}@{chunker.version}",
                          dense_disabled_reason="bench: BM25 only, as offline", sparse_tokenizer=sparse.TOKENIZER_VERSION)
    return parsed, avgdl, info


def build_points(parsed, avgdl: float) -> list[tuple[str, str, list[StoredPoint]]]:
    out = []
    for doc, chunks in parsed:
        pts = [StoredPoint(c.chunk_id, {**c.payload(), "content_hash": doc.content_hash},
                           SparseVector(*sparse.document_vector(c.indexed_text(), avgdl))) for c in chunks]
        out.append((doc.doc_id, doc.content_hash, pts))
    return out


def settings_for(data_dir: Path, backend: str) -> Settings:
    # levers off: this times the store; rescore's embedding time is bench/query_latency.py's business
    return Settings(_env_file=None, data_dir=data_dir, llm_mode="extractive", rerank_model=None,
                    store_backend=backend, retrieval_levers="none")


def fill(settings: Settings, info: CollectionInfo, docs) -> float:
    t = time.perf_counter()
    with open_store(settings) as store:
        store.create(info)
        if settings.store_backend == "local":
            # a new collection has nothing to replace: plain upserts (per-document delete-by-filter
            # scans every point in local mode, which would take the 16x fill to hours)
            from rag_app.store.client import _point

            pts = [_point(p) for _, _, ps in docs for p in ps]
            for i in range(0, len(pts), 1024):
                store.client.upsert(info.name, points=pts[i:i + 1024])
        else:
            for doc_id, content_hash, pts in docs:
                store.replace_document(info.name, doc_id, content_hash, pts)
        store.commit(info.name)
    return time.perf_counter() - t


def measure(settings: Settings, questions: list[str]) -> tuple[float, float, float, float]:
    """(retrieve p50, whole p50) on the first pass over the questions (a freshly opened store: its
    payload pages are read cold) and on a second pass (warm, as in a long-running service)."""
    with RagApp(settings) as app:
        app.ask(questions[0])  # warm-up: jieba dictionary, titles cache
        rows = []
        for _ in range(2):
            for q in questions:
                t0 = time.perf_counter()
                answer = app.ask(q)
                whole = (time.perf_counter() - t0) * 1000
                rows.append((whole, next(u.latency_ms for u in answer.usage if u.stage == "retrieve")))
    cold, warm = rows[:len(questions)], rows[len(questions):]
    return (percentile([r[1] for r in cold], 50), percentile([r[0] for r in cold], 50),
            percentile([r[1] for r in warm], 50), percentile([r[0] for r in warm], 50))


def serve_rss(data_dir: Path, backend: str, questions: list[str]) -> float:
    """Peak RSS (VmHWM, MiB) of `rag serve` on the store after asking the questions over HTTP."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RAG_DATA_DIR": str(data_dir), "RAG_LLM_MODE": "extractive", "RAG_RERANK_MODEL": "none",
           "RAG_STORE_BACKEND": backend, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "rag_app.cli.main", "serve", "--port", str(port)], env=env,
                            cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        for q in questions:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/ask", json.dumps({"question": q}).encode(),
                                         {"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=600).read()
        status = Path(f"/proc/{proc.pid}/status").read_text()
        return int(next(l for l in status.splitlines() if l.startswith("VmHWM")).split()[1]) / 1024
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scales", default="1,4,16")
    ap.add_argument("--baseline-scales", default="1,4,16", help="scales also run on local mode ('' for none)")
    ap.add_argument("--n", type=int, default=100, help="questions per Edge run")
    ap.add_argument("--baseline-n", type=int, default=20, help="questions per local-mode run (it is slow)")
    ap.add_argument("--rss", action="store_true", help="peak RSS of `rag serve` at the largest scale")
    args = ap.parse_args()
    print(machine_line())
    scales = [int(x) for x in args.scales.split(",")]
    base_scales = {int(x) for x in args.baseline_scales.split(",") if x}
    questions = [json.loads(l)["question"] for l in QA_ZH.read_text(encoding="utf-8").splitlines()]
    parsed, avgdl, info = bm25_corpus()
    rows, rss = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for scale in scales:
            docs = build_points(list(replicate(parsed, scale)), avgdl)
            n_chunks = sum(len(p) for _, _, p in docs)
            for backend in ("edge", "local") if scale in base_scales else ("edge",):
                s = settings_for(Path(tmp) / f"{backend}-{scale}x", backend)
                fill_s = fill(s, info, docs)
                n = args.n if backend == "edge" else args.baseline_n
                ret, whole, ret_w, whole_w = measure(s, questions[:n])
                rows.append((scale, backend, n_chunks, n, fill_s, ret, whole, ret_w, whole_w))
                print(f"{scale:>3}x {backend:<5} {n_chunks:>6} chunks  write {fill_s:6.1f} s  retrieve p50 "
                      f"{ret:8.2f} ms (warm {ret_w:8.2f})  whole p50 {whole:8.2f} ms (warm {whole_w:8.2f})", flush=True)
            if args.rss and scale == max(scales):
                for backend in ("edge", "local") if scale in base_scales else ("edge",):
                    rss[backend] = serve_rss(Path(tmp) / f"{backend}-{scale}x", backend, questions[:20])
            del docs
    print(f"\n{'':<20}{'first pass (cold)':^31}{'second pass (warm)':^31}")
    print(f"{'scale':<6}{'store':<7}{'chunks':>7}" + f"{'retrieve':>9}{'whole':>9}{'x local':>8}{'x 1x':>5}" * 2)
    first = {b: (w, ww) for sc, b, *_, w, _, ww in rows if sc == min(scales)}
    local = {sc: (w, ww) for sc, b, *_, w, _, ww in rows if b == "local"}
    for sc, b, chunks, n, _, ret, whole, ret_w, whole_w in rows:
        cells = []
        for i, (r, w) in enumerate(((ret, whole), (ret_w, whole_w))):
            vs = f"{local[sc][i] / w:7.0f}x" if b == "edge" and sc in local else f"{'':>8}"
            cells.append(f"{r:>8.1f}{w:>9.1f}{vs}{w / first[b][i]:>6.2f}x")
        print(f"{str(sc) + 'x':<6}{b:<7}{chunks:>7}{''.join(cells)}")
    print("p50s in ms; x local: local-mode whole p50 / Edge's at the same scale; x 1x: whole p50 / the same "
          "store's at the smallest scale. Edge ran --n questions, local mode --baseline-n.")
    for b, mib in rss.items():
        print(f"peak RSS of `rag serve` at {max(scales)}x, {b}: {mib:.0f} MiB (VmHWM after 20 questions)")


if __name__ == "__main__":
    main()
