"""Shared bits of the benchmarks: the corpus location and a stable timer."""
from __future__ import annotations

import os
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("RAG_SHARED_DIR", REPO.parent / "shared"))
CORPUS_ZH = SHARED / "data" / "legal_zh" / "corpus"
QA_ZH = SHARED / "data" / "legal_zh" / "qa_dev.jsonl"


def best_of(fn, repeat: int = 3) -> float:
    """Fastest of `repeat` runs: the least disturbed by other work on a shared machine."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best
