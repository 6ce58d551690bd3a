"""A question's embedding, old path against new, in one process: e5-onnx's encode_query as it ran before
(the batch graph, words + mask, on a one-thread session) and as it runs now (the query graph: batch of
one, no mask; rag_app/e5_onnx.py build_query; both run a question over WIDE_TOKENS on the two-thread
batch session), plus the query graph on a two-thread session (an idle
second core for one short run). Each question is cut to 160 characters as the query path cuts it, runs
through every path in a random order per question, --reps times; CPU is the calling thread's
(time.thread_time: onnxruntime's one-thread session runs on it) and the process's (time.process_time,
which counts a two-thread session's pool thread). Wall per question too, and the load.

    .venv/bin/python bench/query_embed.py [--questions 200] [--reps 3] [--qa qa_dev.jsonl]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from bench.common import QA_ZH
from rag_app.e5_onnx import WIDE_TOKENS, E5OnnxEncoder, _deq, build_query
from rag_app.embedding import default_models_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--qa", type=Path, default=QA_ZH)
    args = ap.parse_args()
    import onnxruntime as ort

    enc = E5OnnxEncoder(default_models_dir())
    lines = args.qa.read_text(encoding="utf-8").splitlines()
    rng = random.Random(0)
    questions = [json.loads(line)["question"][:160] for line in rng.sample(lines, min(args.questions, len(lines)))]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = 2, 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    two = ort.InferenceSession(str(build_query(default_models_dir())), opts, providers=["CPUExecutionProvider"])

    def old(q: str) -> np.ndarray:  # encode_query before: the batch graph (both paths: over WIDE_TOKENS, two threads)
        row = enc.token_ids([q], "query: ")[0]
        return enc._run(row, enc._wide if enc._wide is not None and len(row) > WIDE_TOKENS else None)

    def two_threads(q: str) -> np.ndarray:
        row = enc.token_ids([q], "query: ")[0]
        words = _deq(enc._word_blocks[np.asarray(row, dtype=np.int64)]).reshape(1, len(row), enc.H)
        return two.run(None, {"words": words})[0][0]

    paths = {"old (batch graph)": old, "new (query graph)": enc.encode_query, "new, 2 threads": two_threads}
    ref = np.stack([old(q) for q in questions])
    tokens = sorted(len(enc.token_ids([q], "query: ")[0]) for q in questions)
    print(f"{len(questions)} questions from {args.qa.name}: e5 tokens p10/p50/p90 "
          f"{tokens[len(tokens) // 10]}/{tokens[len(tokens) // 2]}/{tokens[len(tokens) * 9 // 10]}")
    for name, fn in list(paths.items())[1:]:
        vecs = np.stack([fn(q) for q in questions])
        cos = (vecs * ref).sum(axis=1)
        print(f"{name}: cosine to old min {cos.min():.6f}, {int((vecs == ref).all(axis=1).sum())} of "
              f"{len(questions)} vectors bit-identical")
    load = os.getloadavg()[0]
    # the two-thread session's pool thread would bill its tail to whichever path ran next: timed apart
    main_paths = {name: fn for name, fn in paths.items() if name != "new, 2 threads"}
    first = timed(main_paths, questions, args.reps, rng)
    second = timed({name: paths[name] for name in ("new (query graph)", "new, 2 threads")}, questions, args.reps, rng)
    short = np.array([len(enc.token_ids([q], "query: ")[0]) <= 32 for q in questions])
    print(f"load average {load:.2f} -> {os.getloadavg()[0]:.2f}; ms per question (each the sum of its {args.reps} "
          f"runs / {args.reps}); x = the path's total over the first row's; short = the {int(short.sum())} "
          f"questions of <= 32 tokens")
    print(f"{'path':<18}{'thread CPU':>11}{'p50':>6}{'x':>7}{'x short':>8}{'process CPU':>12}{'x':>7}"
          f"{'wall':>7}{'p50':>6}{'x':>7}")
    for name in main_paths:
        row(name, first, "old (batch graph)", short, args.reps)
    print("apart, against the query graph on one thread:")
    for name in ("new (query graph)", "new, 2 threads"):
        row(name, second, "new (query graph)", short, args.reps)


def timed(paths, questions, reps, rng) -> dict[str, np.ndarray]:
    """Per path: (3, questions) of thread CPU, process CPU and wall summed over reps, paths in random order."""
    out = {name: np.zeros((3, len(questions))) for name in paths}
    for _ in range(reps):
        for i, q in enumerate(questions):
            for name in rng.sample(list(paths), len(paths)):
                c, p, w = time.thread_time(), time.process_time(), time.perf_counter()
                paths[name](q)
                out[name][:, i] += (time.thread_time() - c, time.process_time() - p, time.perf_counter() - w)
    return out


def row(name: str, t: dict[str, np.ndarray], base: str, short: np.ndarray, reps: int) -> None:
    ms, b = t[name] / reps * 1e3, t[base] / reps * 1e3
    print(f"{name:<18}{ms[0].mean():>11.2f}{np.median(ms[0]):>6.2f}{ms[0].sum() / b[0].sum():>7.3f}"
          f"{ms[0][short].sum() / b[0][short].sum():>8.3f}{ms[1].mean():>12.2f}{ms[1].sum() / b[1].sum():>7.3f}"
          f"{ms[2].mean():>7.2f}{np.median(ms[2]):>6.2f}{ms[2].sum() / b[2].sum():>7.3f}")

if __name__ == "__main__":
    main()
