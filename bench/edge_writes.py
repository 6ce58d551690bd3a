"""CPU time (user + sys, every thread of this process) of Qdrant Edge's writes at 1x, 2x and 4x the legal_zh
corpus, as `rag ingest` makes them (per document: document_hash, replace_document; then commit = flush +
the engine's optimizer), split by call, with each scale's ratio to 1x (issue 20 item 4: 4x corpus <= 4.5x
time), and the CPU of opening the finished store in a new process (what every `rag ask` pays), median of
--opens, less `import qdrant_edge`.

The larger corpora are the real chunks replicated with new doc ids, titles and chunk ids
(bench/store_scale.py's `replicate`); the sparse vectors are built before the clock starts. Each scale
writes a fresh store in a temp dir. `--indexing-threshold KB` runs a second arm with the engine's indexing
threshold set (0: the optimizer never rewrites the appendable segment as an indexed one).

    .venv/bin/python bench/edge_writes.py [--scales 1,2,4] [--indexing-threshold 0] [--opens 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine_line  # noqa: E402
from bench.store_scale import bm25_corpus, build_points, replicate  # noqa: E402
from rag_app.store import CollectionInfo  # noqa: E402
from rag_app.store.edge import EdgeStore  # noqa: E402

CALLS = ("create", "document_hash", "replace_document", "commit", "close")


def write_cpu(root: Path, info: CollectionInfo, docs, threshold: int | None) -> dict[str, float]:
    """CPU seconds per store call over the whole fill, as `index_documents` makes them."""
    spent: dict[str, float] = defaultdict(float)

    def timed(call: str, fn, *args):
        t = time.process_time()
        out = fn(*args)
        spent[call] += time.process_time() - t
        return out

    store = EdgeStore(root, indexing_threshold_kb=threshold)
    timed("create", store.create, info)
    for doc_id, content_hash, pts in docs:
        timed("document_hash", store.document_hash, info.name, doc_id)
        timed("replace_document", store.replace_document, info.name, doc_id, content_hash, pts)
    timed("commit", store.commit, info.name)
    timed("close", store.close)  # flushes
    return dict(spent)


def _cpu_of(code: str, *args: str) -> float:
    proc = subprocess.Popen([sys.executable, "-c", code, *args])
    _, _, used = os.wait4(proc.pid, 0)
    return used.ru_utime + used.ru_stime


def open_cpu(shard: Path, n: int) -> float:
    """CPU of opening the shard in a fresh process, less the import's (medians of n, interleaved)."""
    load, imp = [], []
    for _ in range(n):
        imp.append(_cpu_of("import qdrant_edge"))
        load.append(_cpu_of("import sys, qdrant_edge as qe; qe.EdgeShard.load(sys.argv[1]).close()", str(shard)))
    return statistics.median(load) - statistics.median(imp)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scales", default="1,2,4")
    ap.add_argument("--indexing-threshold", type=int, default=None, help="KB; adds an arm with this threshold")
    ap.add_argument("--opens", type=int, default=3)
    args = ap.parse_args()
    print(machine_line())
    scales = [int(x) for x in args.scales.split(",")]
    arms: list[int | None] = [None] + ([args.indexing_threshold] if args.indexing_threshold is not None else [])
    parsed, avgdl, info = bm25_corpus()
    results: dict[tuple[int | None, int], tuple[dict[str, float], float]] = {}
    chunks: dict[int, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for scale in scales:
            docs = build_points(list(replicate(parsed, scale)), avgdl)
            chunks[scale] = sum(len(p) for _, _, p in docs)
            for arm in arms:  # interleaved per scale
                root = Path(tmp) / f"{scale}x-{arm}"
                spent = write_cpu(root, info, docs, arm)
                results[arm, scale] = spent, open_cpu(root / info.name / "shard", args.opens)
            del docs
    print(f"{'threshold':<10}{'scale':<6}{'chunks':>7}{'writes s':>9}{'x 1x':>7}  " + "  ".join(CALLS) + "   open ms")
    for arm in arms:
        base, base_total = results[arm, scales[0]][0], sum(results[arm, scales[0]][0].values())
        for scale in scales:
            r, opened = results[arm, scale]
            cells = "  ".join(f"{r[c]:.2f}" + (f" ({r[c] / base[c]:.1f}x)" if base[c] > 0.005 else "") for c in CALLS)
            print(f"{'default' if arm is None else str(arm) + ' KB':<10}{str(scale) + 'x':<6}{chunks[scale]:>7}"
                  f"{sum(r.values()):>9.2f}{sum(r.values()) / base_total:>6.2f}x  {cells}   {opened * 1000:.0f}")
    print("CPU seconds (user+sys, all threads) per store call, summed over the fill; (Nx): that call's ratio to "
          f"{scales[0]}x; open ms: CPU of EdgeShard.load in a new process. Target: 4x writes <= 4.5x the 1x writes.")


if __name__ == "__main__":
    main()
