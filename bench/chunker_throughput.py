"""Chunker throughput (MB/s of source text) on the full Chinese corpus, relative to fixed-512 run
in the same process. Target: the legal chunker's rule stage >= 10x the semantic sliding window.

    .venv/bin/python bench/chunker_throughput.py
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import CORPUS_ZH, best_of, machine_line  # noqa: E402
from rag_app.chunking.registry import build_chunker  # noqa: E402
from rag_app.config.settings import Settings  # noqa: E402
from rag_app.models.embedding import load_embeddings  # noqa: E402
from rag_app.ingest.loaders import load_document  # noqa: E402


def main() -> None:
    print(machine_line())
    settings = Settings(_env_file=None)
    docs = [load_document(p) for p in sorted(CORPUS_ZH.rglob("*.md"))]
    mb = sum(len(d.text.encode()) for d in docs) / 1e6
    emb = load_embeddings(settings.embed_model, cache=None)  # no cache: pay the embedding like a first run
    rows = []
    for name in ("fixed-512", "fixed-256", "recursive", "sentence-256", "legal", "semantic-window"):
        chunker = build_chunker(name, settings, emb)
        repeat = 1 if name == "semantic-window" else 3
        secs = best_of(lambda: [chunker.chunk(d) for d in docs], repeat)
        rows.append((name, secs, mb / secs))
    base = dict((n, r) for n, _, r in rows)["fixed-512"]
    window = dict((n, r) for n, _, r in rows)["semantic-window"]
    print(f"corpus: {len(docs)} files, {mb:.2f} MB; embedder for semantic-window: {emb.model_name}")
    print(f"{'chunker':<16}{'seconds':>9}{'MB/s':>9}{'x fixed-512':>13}")
    for name, secs, rate in rows:
        print(f"{name:<16}{secs:>9.2f}{rate:>9.2f}{rate / base:>13.2f}")
    print(f"legal / semantic-window throughput: {dict((n, r) for n, _, r in rows)['legal'] / window:.1f}x (target >= 10x)")


if __name__ == "__main__":
    main()
