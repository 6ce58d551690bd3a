"""A question's embedding, old path against new, in one process: e5-onnx's encode_query as it ran before
(the padded-batch graph, words + mask: rag_app/models/e5_onnx.py build(), on a one-thread session; over
WIDE_TOKENS on a two-thread one) and as it runs now (the one-text graph: batch fixed to one, no mask;
build_single), plus the one-text graph on the two-thread session for every question (an idle second
core for one short run). Each question is cut to 160 characters as the query path cuts it and runs
through every path in a random order per question, --reps times. CPU is the calling thread's
(time.thread_time: a one-thread session runs on it) and the process's (time.process_time, which counts
a two-thread session's pool thread); wall per question too, and the load. --passages N times N corpus
chunks the same way (old against new, one text a run, as ingest's rescore pass embeds them).

    .venv/bin/python bench/query_embed.py [--questions 200] [--reps 3] [--qa qa_dev.jsonl] [--passages 0]
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

from bench.common import QA_ZH, machine_line
from rag_app.models.e5_onnx import WIDE_TOKENS, E5OnnxEncoder, _deq, build
from rag_app.models.embedding import default_models_dir

OLD, NEW, TWO = "old (batch graph)", "new (one-text)", "new, 2 threads"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--qa", type=Path, default=QA_ZH)
    ap.add_argument("--passages", type=int, default=0, help="also time this many corpus chunks")
    args = ap.parse_args()
    print(machine_line())
    import onnxruntime as ort

    enc = E5OnnxEncoder(default_models_dir())
    batch_graph = str(build(default_models_dir()))

    def session(threads: int):
        opts = ort.SessionOptions()  # as the encoder sets its own
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return ort.InferenceSession(batch_graph, opts, providers=["CPUExecutionProvider"])

    old_one, old_wide = session(1), session(2)

    def old(text: str, prefix: str) -> np.ndarray:
        row = enc.token_ids([text], prefix)[0]
        words = _deq(enc._word_blocks[np.asarray(row, dtype=np.int64)]).reshape(1, len(row), enc.H)
        mask = np.ones((1, len(row)), dtype=np.float32)
        return (old_wide if len(row) > WIDE_TOKENS else old_one).run(None, {"words": words, "mask": mask})[0][0]

    def two_threads(text: str, prefix: str) -> np.ndarray:
        return enc._run(enc.token_ids([text], prefix)[0], enc._wide)

    def new(text: str, prefix: str) -> np.ndarray:
        return enc.encode_query(text) if prefix == "query: " else enc.encode_passages([text])[0]

    rng = random.Random(0)
    lines = args.qa.read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line)["question"][:160] for line in rng.sample(lines, min(args.questions, len(lines)))]
    compare("questions from " + args.qa.name, questions, "query: ", {OLD: old, NEW: new, TWO: two_threads},
            enc, args.reps, rng)
    if args.passages:
        from bench.embed_throughput import corpus_texts

        chunks = rng.sample(corpus_texts(1, None), args.passages)
        compare("corpus chunks", chunks, "passage: ", {OLD: old, NEW: new}, enc, args.reps, rng)


def compare(what: str, texts: list[str], prefix: str, paths: dict, enc, reps: int, rng) -> None:
    tokens = sorted(len(enc.token_ids([t], prefix)[0]) for t in texts)
    print(f"{len(texts)} {what}: e5 tokens p10/p50/p90 {tokens[len(tokens) // 10]}/{tokens[len(tokens) // 2]}/"
          f"{tokens[len(tokens) * 9 // 10]}")
    ref = np.stack([paths[OLD](t, prefix) for t in texts])
    for name in list(paths)[1:]:
        vecs = np.stack([paths[name](t, prefix) for t in texts])
        print(f"{name}: cosine to old min {(vecs * ref).sum(axis=1).min():.6f}, "
              f"{int((vecs == ref).all(axis=1).sum())} of {len(texts)} vectors bit-identical")
    load = os.getloadavg()[0]
    # a two-thread session's pool thread would bill its tail to whichever path ran next: timed apart
    first = timed({name: paths[name] for name in (OLD, NEW)}, texts, prefix, reps, rng)
    second = timed({name: paths[name] for name in (NEW, TWO)}, texts, prefix, reps, rng) if TWO in paths else None
    short = np.array([len(enc.token_ids([t], prefix)[0]) <= 32 for t in texts])
    print(f"load average {load:.2f} -> {os.getloadavg()[0]:.2f}; ms per text (the sum of its {reps} runs / {reps});"
          f" x = total over the first row's; short = the {int(short.sum())} of <= 32 tokens")
    print(f"{'path':<18}{'thread CPU':>11}{'p50':>6}{'x':>7}{'x short':>8}{'process CPU':>12}{'x':>7}"
          f"{'wall':>7}{'p50':>6}{'x':>7}")
    for name in (OLD, NEW):
        row(name, first, OLD, short, reps)
    if second is not None:
        print("apart, against the one-text graph on one thread:")
        for name in (NEW, TWO):
            row(name, second, NEW, short, reps)


def timed(paths: dict, texts: list[str], prefix: str, reps: int, rng) -> dict[str, np.ndarray]:
    """Per path: (3, texts) of thread CPU, process CPU and wall summed over reps, paths in random order."""
    out = {name: np.zeros((3, len(texts))) for name in paths}
    for _ in range(reps):
        for i, text in enumerate(texts):
            for name in rng.sample(list(paths), len(paths)):
                c, p, w = time.thread_time(), time.process_time(), time.perf_counter()
                paths[name](text, prefix)
                out[name][:, i] += (time.thread_time() - c, time.process_time() - p, time.perf_counter() - w)
    return out


def row(name: str, t: dict[str, np.ndarray], base: str, short: np.ndarray, reps: int) -> None:
    ms, b = t[name] / reps * 1e3, t[base] / reps * 1e3
    x_short = f"{ms[0][short].sum() / b[0][short].sum():>8.3f}" if short.any() else f"{'-':>8}"
    print(f"{name:<18}{ms[0].mean():>11.2f}{np.median(ms[0]):>6.2f}{ms[0].sum() / b[0].sum():>7.3f}{x_short}"
          f"{ms[1].mean():>12.2f}{ms[1].sum() / b[1].sum():>7.3f}"
          f"{ms[2].mean():>7.2f}{np.median(ms[2]):>6.2f}{ms[2].sum() / b[2].sum():>7.3f}")


if __name__ == "__main__":
    main()
