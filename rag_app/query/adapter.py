"""A query adapter: a learned linear map applied to the question's vector in the rescore embedder's space
(multilingual-e5-small), so an everyday question lands nearer the statute passages that answer it.
Passages keep the vectors ingest made; only the question moves: v' = normalise(v + v W).

Why a map on the question side only: e5-small reads Chinese but was never taught how a layperson's words
("房东不退押金") relate to a statute's ("出租人…返还"). Fine-tuning the whole model would need its float
weights, a GPU-sized training run and a new embedding pass over every corpus; a 384x384 map learned from
questions with gold spans (`rag train-adapter`, seconds on two cores) needs none of these and costs one
small matrix product per question.

The artefact is one `.npz` (the matrix, its version and its training record as JSON), never a pickle.
One ships inside the package (rag_app/data/adapters/, trained on all of legal_zh's qa_dev with seed 0; its
record says how) and is the default: RAG_QUERY_ADAPTER=auto uses it wherever the rescore lever runs over the
embedder it was trained over (the held-out run confirmed the stack it belongs to: docs/evaluation-and-levers.md).
`rag train-adapter` writes others under RAG_DATA_DIR/adapters (`latest`, or a path; per variant for a gray
release).
"""
from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag_app.core import ConfigError
from rag_app.core import Embedder
from rag_app.core import EmbedUsage

@dataclass(frozen=True)
class QueryAdapter:
    matrix: np.ndarray  # (d, d), float32: the learned residual
    version: str
    model: str  # the rescore embedder it was trained over (its vectors are meaningless to another)
    record: dict  # the training run: time, data, settings, metrics

    def apply(self, vector: np.ndarray | list[float]) -> np.ndarray:
        from rag_app.query.blas import one_thread

        with one_thread():  # one question's 384 x 384 product (rag_app/query/blas.py)
            return adapt(vector, self.matrix)


def adapt(vectors: np.ndarray | list[float], W: np.ndarray) -> np.ndarray:
    """normalise(v + vW) for one vector or a row per question (training and the benches move many at once);
    a vector the map sends to zero is left as it was."""
    v = np.asarray(vectors, dtype=np.float32)
    out = v + v @ W
    norm = np.linalg.norm(out, axis=-1, keepdims=True)
    return np.where(norm > 0, out / np.where(norm > 0, norm, 1.0), v)


class AdaptedQueries:
    """The rescore embedder with its question vectors moved by an adapter; passages, the cache and every
    other call go to the embedder unchanged (their vectors are what ingest made)."""

    def __init__(self, embeddings: Embedder, adapter: QueryAdapter):
        self._embeddings, self.adapter = embeddings, adapter
        self.model_name = embeddings.model_name

    def embed_query_with_stats(self, text: str) -> tuple[list[float], EmbedUsage]:
        vector, used = self._embeddings.embed_query_with_stats(text)
        return self.adapter.apply(vector).tolist(), used

    def __getattr__(self, name: str) -> Any:  # embed_array_with_stats, cached_with_stats, ...
        return getattr(self._embeddings, name)


def adapted(embeddings: Embedder | None, adapter: QueryAdapter | None) -> Any:
    """`embeddings` with the adapter on its questions, when there is one and it was trained over this model."""
    if embeddings is None or adapter is None or adapter.model != embeddings.model_name:
        return embeddings
    return AdaptedQueries(embeddings, adapter)


def save_adapter(matrix: np.ndarray, record: dict, out_dir: Path) -> Path:
    """`out_dir/adapter-<version>.npz` (matrix + record) and the record as `.json` beside it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"adapter-{record['version']}.npz"
    np.savez_compressed(path, matrix=matrix.astype(np.float32),
                        record=np.array(json.dumps(record, ensure_ascii=False, sort_keys=True)))
    path.with_suffix(".json").write_text(json.dumps({**record, "artefact_bytes": path.stat().st_size},
                                                    ensure_ascii=False, indent=1), encoding="utf-8")
    return path


_loaded: dict[str, QueryAdapter] = {}
_lock = threading.Lock()


def load_adapter(path: str | Path) -> QueryAdapter:
    """The artefact at `path`, loaded once per process (a ConfigError naming the file when it is not one)."""
    key = str(Path(path).resolve())
    with _lock:
        if key not in _loaded:
            try:
                with np.load(key, allow_pickle=False) as data:
                    record = json.loads(str(data["record"]))
                    matrix = np.asarray(data["matrix"], dtype=np.float32)
                if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
                    raise ValueError(f"matrix of shape {matrix.shape}, not square")
                _loaded[key] = QueryAdapter(matrix, str(record["version"]), str(record["model"]), record)
            except (OSError, KeyError, ValueError) as e:
                raise ConfigError(f"RAG_QUERY_ADAPTER: {path} is not a query adapter ({e}); run "
                                  "`rag train-adapter`, or set RAG_QUERY_ADAPTER=auto or none") from e
        return _loaded[key]


BUNDLED_DIR = Path(__file__).resolve().parents[1] / "data" / "adapters"


def bundled_adapter(model: str) -> Path | None:
    """The adapter shipped with the package for the rescore embedder `model`, or None (another embedder:
    its vectors are another space)."""
    for path in sorted(BUNDLED_DIR.glob("adapter-*.npz")):
        if load_adapter(path).model == model:
            return path
    return None


def latest_adapter(data_dir: str | Path) -> Path | None:
    """The newest artefact `rag train-adapter` wrote under `data_dir/adapters`, or None."""
    found = sorted(Path(data_dir, "adapters").glob("adapter-*.npz"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def adapter_path(setting: str, data_dir: str | Path, model: str | None = None,
                 levers: Iterable[str] = ()) -> str:
    """RAG_QUERY_ADAPTER as a file path ('' for none): auto | none | latest | a path. `auto` (the default)
    is the bundled adapter of the rescore embedder `model`, left out ('') beside the ranker lever (its model
    learned from unmoved vectors) or for an embedder none was trained over. A ConfigError names the setting
    when `latest` finds nothing or the path is not a file."""
    s = setting.strip()
    if s in ("", "none"):
        return ""
    if s == "auto":
        found = bundled_adapter(model) if model and "ranker" not in levers else None
        return str(found) if found else ""
    if s == "latest":
        found = latest_adapter(data_dir)
        if found is None:
            raise ConfigError(f"RAG_QUERY_ADAPTER=latest: no adapter under {Path(data_dir, 'adapters')}; run "
                              "`rag train-adapter` first, or set RAG_QUERY_ADAPTER=auto (the bundled one) or none")
        return str(found)
    if not Path(s).is_file():
        raise ConfigError(f"RAG_QUERY_ADAPTER={s!r} is not a file: use auto, none, latest or the .npz path "
                          "`rag train-adapter` printed")
    return s


def refusal(path: str, levers: Iterable[str], rescore_model: str, model_setting: str) -> str | None:
    """Why the adapter at `path` cannot serve these levers, or None: beside the ranker lever (its model
    learned from unmoved question vectors), or trained over another rescore embedder (its map would be
    skipped without a word). Start-up (RAG_QUERY_ADAPTER) and `rag eval` (query_adapter=) both ask."""
    if "ranker" in levers:
        return ("does not combine with the ranker lever (its model learned from unmoved question vectors); "
                "leave one of them out")
    trained = load_adapter(path).model
    if trained != rescore_model:
        return f"{path} was trained over {trained}, not {model_setting}={rescore_model}; train one over it or leave it out"
    return None


def query_adapter(params: Any) -> QueryAdapter | None:
    """The adapter the levers' settings name (QueryKnobs.query_adapter: a path, which QueryConfig holds, or
    auto and none as RAG_QUERY_ADAPTER reads them), if any and if it was trained over their rescore embedder."""
    path = params.query_adapter
    if path.strip() in ("", "none", "auto"):
        path = adapter_path(path, "", params.rescore_model, params.named_levers())
    if not path:
        return None
    adapter = load_adapter(path)
    return adapter if adapter.model == params.rescore_model else None


def trained_on(path: str, qa: str | Path, split: str | None) -> str | None:
    """Why scoring the adapter at `path` on `split` of the QA file `qa` would read questions it learned from
    (the bundled adapter learned all of legal_zh's qa_dev), or None. Matched by the file's sha256, which the
    training record keeps; `split` None is the whole file."""
    import hashlib

    record = load_adapter(path).record
    if not record.get("qa_sha256") or record["qa_sha256"] != hashlib.sha256(Path(qa).read_bytes()).hexdigest():
        return None
    learned = record.get("split", "all")
    if learned == "all" or split is None or split == learned:
        return (f"adapter {record.get('version')} learned {learned} of {Path(qa).name}, so scoring it on "
                f"{split or 'all'} of it is in sample")
    return None
