"""What `rag serve` keeps in memory per collection it has answered from (#46 N3): N collections, each
holding one law (the fixture's 劳动法, BM25), are asked one question each through the service's
VariantPool, twice in child processes of their own: with every collection kept open (the behaviour before
#46: RAG_MAX_OPEN_COLLECTIONS past N) and with RAG_MAX_OPEN_COLLECTIONS=2. Prints each child's RSS before and
after, the growth per collection, the apps and shards left open, and the ratio of the two growths.

    PYTHONPATH=$PWD python bench/collection_memory.py [N]
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, machine_line  # noqa: E402

LAW = REPO / "tests" / "fixtures" / "laws" / "社会法" / "劳动法(2018-12-29).md"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(root: Path, n: int, max_open: int) -> dict:
    """One process: the collections' shards exist already; touch each through the pool, then report."""
    import gc

    from rag_app.config.settings import Settings
    from rag_app.service.pool import VariantPool

    settings = Settings(_env_file=None, data_dir=root, retriever="bm25", rerank_model=None,
                        max_open_collections=max_open)
    pool = VariantPool(settings)
    pool.app_for("default", "c0").ask("劳动者的试用期最长多久？")  # the models and tokenizers, loaded once
    gc.collect()
    before = rss_mb()
    for i in range(n):
        assert pool.app_for("default", f"c{i}").ask("劳动者的试用期最长多久？").text
    gc.collect()
    after = rss_mb()
    out = {"max_open": max_open, "rss_before_mb": round(before, 1), "rss_after_mb": round(after, 1),
           "growth_per_collection_mb": round((after - before) / n, 2), "open_apps": len(pool.open_collections()),
           "open_shards": len(pool.base.store._shards)}
    pool.close()
    return out


def build(root: Path, n: int) -> None:
    from rag_app.app import RagApp
    from rag_app.config.settings import Settings

    for i in range(n):
        with RagApp(Settings(_env_file=None, data_dir=root, retriever="bm25", rerank_model=None,
                             collection=f"c{i}")) as app:
            assert not app.ingest([LAW]).errors


def main(n: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="collection-memory-"))
    try:
        build(root, n)
        results = []
        for max_open in (n + 1, 2):
            env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
            r = subprocess.run([sys.executable, __file__, "--child", str(root), str(n), str(max_open)], env=env,
                               capture_output=True, text=True, check=True)
            results.append(json.loads(r.stdout.strip().splitlines()[-1]))
        print(machine_line())
        print(f"{n} collections of one law each (BM25), one question each, through rag serve's VariantPool")
        for r in results:
            print(f"max_open={r['max_open']:>3}: RSS {r['rss_before_mb']:.1f} -> {r['rss_after_mb']:.1f} MB, "
                  f"{r['growth_per_collection_mb']:.2f} MB per collection; open apps {r['open_apps']}, "
                  f"open shards {r['open_shards']}")
        kept, bounded = results
        ratio = bounded["growth_per_collection_mb"] / kept["growth_per_collection_mb"] if kept[
            "growth_per_collection_mb"] > 0 else float("nan")
        print(f"growth with RAG_MAX_OPEN_COLLECTIONS=2 / all kept open: {ratio:.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
