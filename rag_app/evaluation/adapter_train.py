"""Training the query adapter (rag_app/query/adapter.py): every question with gold spans is embedded as the
rescore lever embeds it, every chunk of the collection keeps the vector ingest's pass made, and a residual
linear map W is fitted so that normalise(q + qW) puts the chunks holding the question's gold first among
*all* chunks (a softmax over the whole collection, each gold weighing 1/number of its chunks; L2 on W
keeps it near the identity). Seeded, seconds on two cores; the artefact names its data and settings.

Settings were chosen on `tune` by grouped cross-validation (bench/adapter_cv.py, folds grouped by gold
article, so a fold's articles are never seen in training: how held-out questions behave).
"""
from __future__ import annotations

import hashlib
import json
import platform
import time
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from rag_app.core.types import Chunk
from rag_app.evaluation.hits import covers
from rag_app.evaluation.qa import Question
from rag_app.query.adapter import adapt, save_adapter
from rag_app.query.levers.rescore import rescore_text
from rag_app.query.levers.wide import wide_matrix

SEED = 0
FIT = {"epochs": 30, "lr": 1e-3, "l2": 0.01, "temperature": 0.05, "batch": 256}


@dataclass
class Corpus:
    """Every chunk of a collection: its id, (doc, start, end) and its rescore vector (one row of `matrix`)."""

    ids: list[str]
    spans: list[tuple[str, int, int]]
    matrix: np.ndarray

    @classmethod
    def of(cls, store, name: str, embeddings, rel: dict[str, str]) -> Corpus:
        ids, payloads, matrix = wide_matrix(store, name, embeddings, embed_missing=True)
        spans = []
        for c in ids:
            ch = Chunk.from_payload(payloads[c])
            spans.append((rel.get(ch.source_path, ch.source_path), ch.char_start, ch.char_end))
        return cls(ids, spans, np.asarray(matrix, dtype=np.float32))

    def gold_rows(self, q: Question) -> list[list[int]]:
        """For each gold span of `q`, the chunks that hold it (the hit rule of `rag eval`)."""
        return [[i for i in self._rows_by_doc.get(g.doc, []) if covers(*self.spans[i], g)] for g in q.gold]

    @cached_property
    def _rows_by_doc(self) -> dict[str, list[int]]:  # built once, not once per question
        by_doc: dict[str, list[int]] = defaultdict(list)
        for i, (doc, _, _) in enumerate(self.spans):
            by_doc[doc].append(i)
        return by_doc


def question_vectors(questions: list[Question], embeddings, max_chars: int) -> np.ndarray:
    """Each question's vector as the rescore lever makes it (rescore_text, then the embedder)."""
    return np.stack([np.asarray(embeddings.embed_query_with_stats(rescore_text(q.question, max_chars))[0],
                                dtype=np.float32) for q in questions])


def fit(vectors: np.ndarray, golds: list[list[list[int]]], corpus_matrix: np.ndarray, seed: int = SEED,
        **settings) -> np.ndarray:
    """W (d x d) from question vectors and, per question, each gold's chunk rows. A gold no chunk holds
    teaches nothing and is skipped."""
    import torch

    s = {**FIT, **settings}
    rows, targets = [], []
    for v, gs in zip(vectors, golds):
        for g in gs:
            if g:
                rows.append(v)
                targets.append(g)
    d = corpus_matrix.shape[1]
    if not rows:
        return np.zeros((d, d), dtype=np.float32)
    X, M = torch.tensor(np.stack(rows)), torch.tensor(corpus_matrix)
    T = torch.zeros(len(targets), M.shape[0])
    for r, g in enumerate(targets):
        T[r, g] = 1.0 / len(g)
    W = torch.nn.Parameter(torch.zeros(d, d))
    opt = torch.optim.Adam([W], lr=s["lr"])
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        for _ in range(s["epochs"]):
            for b in torch.randperm(len(rows)).split(s["batch"]):
                q = X[b] + X[b] @ W
                q = q / q.norm(dim=-1, keepdim=True)
                loss = -(T[b] * torch.log_softmax(q @ M.T / s["temperature"], -1)).sum(-1).mean()
                loss = loss + s["l2"] * (W ** 2).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
    return W.detach().numpy().astype(np.float32)


def dense_recall(vectors: np.ndarray, golds: list[list[list[int]]], corpus_matrix: np.ndarray, k: int) -> float:
    """Share of gold spans with a chunk among the k nearest chunks of the whole collection (each question
    weighing 1, its golds 1/n), the view the adapter changes."""
    top = np.argsort(-(vectors @ corpus_matrix.T), axis=1, kind="stable")[:, :k]
    per_q = [np.mean([any(i in set(t) for i in g) for g in gs]) for t, gs in zip(top.tolist(), golds) if gs]
    return float(np.mean(per_q)) if per_q else 0.0


def training_record(*, qa: Path, split: str | None, questions: int, corpus_hash: str, model: str,
                    max_chars: int, seed: int, fit_s: float, embed_s: float, pairs: int, chunks: int) -> dict:
    rec = {"kind": "query-adapter", "model": model, "qa": Path(qa).name,
           "qa_sha256": hashlib.sha256(Path(qa).read_bytes()).hexdigest(), "split": split or "all",
           "questions": questions, "pairs": pairs, "corpus_sha256": corpus_hash, "chunks": chunks,
           "rescore_query_chars": max_chars, "fit": FIT, "seed": seed, "fit_s": round(fit_s, 2),
           "embed_s": round(embed_s, 2), "trained_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "python": platform.python_version()}
    keys = ("model", "qa_sha256", "split", "corpus_sha256", "rescore_query_chars", "fit", "seed")
    digest = hashlib.sha256(json.dumps({k: rec[k] for k in keys}, sort_keys=True).encode()).hexdigest()
    rec["version"] = f"a1-{digest[:8]}"
    return rec


def train(app, qa: Path, corpus: Path, *, split: str | None = "tune", seed: int = SEED,
          progress=None) -> tuple[Path, dict]:
    """`rag train-adapter`: the split's questions over the eval collection of the `legal` chunker (built as
    `rag eval` builds it, every chunk's rescore vector included), a fitted map, and the artefact under
    RAG_DATA_DIR/adapters. Returns (its path, its training record)."""
    from rag_app.evaluation.harness import training_set

    questions, docs, rel, info, params, rescorer = training_set(app, qa, corpus, split, progress)
    t0 = time.perf_counter()
    corpus_view = Corpus.of(app.store, info.name, rescorer, rel)
    vectors = question_vectors(questions, rescorer, params.rescore_query_chars)
    golds = [corpus_view.gold_rows(q) for q in questions]
    embed_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    W = fit(vectors, golds, corpus_view.matrix, seed)
    fit_s = time.perf_counter() - t0
    corpus_hash = hashlib.sha256("".join(sorted(d.content_hash for d in docs)).encode()).hexdigest()
    record = training_record(qa=qa, split=split, questions=len(questions), corpus_hash=corpus_hash,
                             model=rescorer.model_name, max_chars=params.rescore_query_chars, seed=seed,
                             fit_s=fit_s, embed_s=embed_s, pairs=sum(1 for gs in golds for g in gs if g),
                             chunks=len(corpus_view.ids))
    # in sample, so not a quality figure: it says the fit did something (bench/adapter_cv.py measures)
    record["in_sample_dense_recall_at_20"] = {"before": round(dense_recall(vectors, golds, corpus_view.matrix, 20), 4),
                                              "after": round(dense_recall(adapt(vectors, W), golds,
                                                                          corpus_view.matrix, 20), 4)}
    path = save_adapter(W, record, app.settings.data_dir / "adapters")
    return path, record
