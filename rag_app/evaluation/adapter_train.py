"""Training the query adapter (rag_app/query/adapter.py): every question with gold spans is embedded as the
rescore lever embeds it, every chunk of the collection keeps the vectors ingest's pass made (its own, or
with RAG_RESCORE_UNIT=article one per article, the chunk as near as its nearest article: the rule the
query path reads), and a residual linear map W is fitted so that normalise(q + qW) puts the chunks holding
the question's gold first among *all* chunks (a softmax over the whole collection, each gold weighing
1/number of its chunks; L2 on W keeps it near the identity). Seeded, seconds on two cores; the artefact
names its data and settings.

Passages users marked wrong (`rag train-adapter --from-feedback`, rag_app/evaluation/feedback_pairs.py)
are negatives: the fit lowers their share of the softmax (-log(1 - p), weighted `neg_weight`).

Settings were chosen on `tune` by grouped cross-validation (bench/adapter_cv.py, folds grouped by gold
article, so a fold's articles are never seen in training: how held-out questions behave).
"""
from __future__ import annotations

import hashlib
import json
import platform
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from rag_app.core import Chunk
from rag_app.evaluation.hits import covers
from rag_app.evaluation.qa import Gold, Question
from rag_app.query import adapt, save_adapter
from rag_app.query.levers import rescore_text
from rag_app.query.levers import DenseView, wide_matrix

SEED = 0
FIT = {"epochs": 30, "lr": 1e-3, "l2": 0.01, "temperature": 0.05, "batch": 256}
NEG_WEIGHT = 1.0  # a passage marked wrong pushes as hard as a gold pulls (only in the fit when there are some)


@dataclass
class Corpus:
    """Every chunk of a collection: its id, (doc, start, end) and its rescore view (a row per chunk or per
    article; `view.chunk_scores` reads a chunk as its best row)."""

    ids: list[str]
    spans: list[tuple[str, int, int]]
    view: DenseView
    unit: str = "chunk"

    @property
    def matrix(self) -> np.ndarray:
        return self.view.matrix

    @classmethod
    def of(cls, store, name: str, embeddings, rel: dict[str, str], unit: str = "chunk") -> Corpus:
        view = wide_matrix(store, name, embeddings, embed_missing=True, unit=unit)
        spans = []
        for c in view.ids:
            ch = Chunk.from_payload(view.payloads[c])
            spans.append((rel.get(ch.source_path, ch.source_path), ch.char_start, ch.char_end))
        return cls(view.ids, spans, view, unit)

    def gold_rows(self, q: Question) -> list[list[int]]:
        """For each gold span of `q`, the chunks that hold it (the hit rule of `rag eval`)."""
        return [[i for i in self._rows_by_doc.get(g.doc, []) if covers(*self.spans[i], g)] for g in q.gold]

    def passage_rows(self, doc: str, start: int, end: int, chunk_id: str | None = None) -> list[int]:
        """The chunks an answer's cited passage lies in: its chunk by id when this collection holds it, else
        those of the same document overlapping at least half of the shorter of the two ranges (a cited
        excerpt is part of a chunk; a merged passage spans two)."""
        row = self._row_of_id.get(chunk_id or "")
        if row is not None:
            return [row]
        out = []
        for i in self._rows_by_doc.get(self.doc_key(doc) or "", []):
            _, a, b = self.spans[i]
            overlap = min(end, b) - max(start, a)
            if overlap > 0 and overlap >= 0.5 * min(end - start, b - a):
                out.append(i)
        return out

    def doc_key(self, doc: str) -> str | None:
        """A document as this corpus names it: the same relative path, or the one whose path ends the
        given one (a live collection records the path it ingested from)."""
        if doc in self._rows_by_doc:
            return doc
        norm = doc.replace("\\", "/")
        found = [d for d in self._rows_by_doc if norm.endswith("/" + d) or norm == d]
        return max(found, key=len) if found else None

    @cached_property
    def _rows_by_doc(self) -> dict[str, list[int]]:  # built once, not once per question
        by_doc: dict[str, list[int]] = defaultdict(list)
        for i, (doc, _, _) in enumerate(self.spans):
            by_doc[doc].append(i)
        return by_doc

    @cached_property
    def _row_of_id(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.ids)}


@dataclass(frozen=True)
class Example:
    """One question the fit learns from: each gold's chunks (pulled up) and chunks marked wrong (pushed down)."""

    golds: list[list[int]]
    negatives: list[int] = field(default_factory=list)


def question_vectors(questions: Sequence[Question], embeddings, max_chars: int) -> np.ndarray:
    """Each question's vector as the rescore lever makes it (rescore_text, then the embedder)."""
    if not questions:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([np.asarray(embeddings.embed_query_with_stats(rescore_text(q.question, max_chars))[0],
                                dtype=np.float32) for q in questions])


def fit(vectors: np.ndarray, golds: list[list[list[int]]], corpus: np.ndarray | DenseView, seed: int = SEED,
        negatives: list[list[int]] | None = None, neg_weight: float = NEG_WEIGHT, **settings) -> np.ndarray:
    """W (d x d) from question vectors and, per question, each gold's chunk rows (and, from feedback, the
    chunks marked wrong for it). `corpus`: a row per chunk, or a DenseView whose chunks are their best row.
    A gold no chunk holds teaches nothing and is skipped."""
    import torch

    s = {**FIT, **settings}
    view = corpus if isinstance(corpus, DenseView) else None
    matrix: np.ndarray = corpus.matrix if isinstance(corpus, DenseView) else corpus
    rows, targets, negs = _examples(vectors, golds, negatives or [[] for _ in golds])
    d = matrix.shape[1]
    if not rows:
        return np.zeros((d, d), dtype=np.float32)
    n_chunks = len(view.ids) if view is not None else matrix.shape[0]
    best = _best_row(view, torch) if view is not None and not view.one_row_each else None
    W = torch.nn.Parameter(torch.zeros(d, d))
    _descend(W, torch.tensor(np.stack(rows)), torch.tensor(matrix), _spread(targets, n_chunks, torch),
             _spread(negs, n_chunks, torch), best, s, seed, neg_weight)
    return W.detach().numpy().astype(np.float32)


def _examples(vectors: np.ndarray, golds: list[list[list[int]]], negatives: list[list[int]]
              ) -> tuple[list[np.ndarray], list[list[int]], list[list[int]]]:
    """One training example per (question, gold a chunk holds) and one per question with chunks marked
    wrong: (question vector, gold rows, wrong chunks), the two kinds never in one example."""
    rows: list[np.ndarray] = []
    targets: list[list[int]] = []
    negs: list[list[int]] = []
    for v, gs, ns in zip(vectors, golds, negatives):
        for g in gs:
            if g:
                rows.append(v)
                targets.append(g)
                negs.append([])
        if ns:
            rows.append(v)
            targets.append([])
            negs.append(sorted(set(ns)))
    return rows, targets, negs


def _spread(lists: list[list[int]], n_chunks: int, torch):
    """A row per example: 1/len over its listed chunks, 0 elsewhere (an empty list: a row of zeros)."""
    out = torch.zeros(len(lists), n_chunks)
    for r, cols in enumerate(lists):
        if cols:
            out[r, cols] = 1.0 / len(cols)
    return out


def _descend(W, X, M, T, N, best, s: dict, seed: int, neg_weight: float) -> None:
    """Adam over W for s["epochs"] epochs of shuffled batches (seeded, without touching the global RNG):
    softmax cross-entropy toward the golds T, -log(1 - p) away from the wrong chunks N, an L2 pull to 0."""
    import torch

    opt = torch.optim.Adam([W], lr=s["lr"])
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        for _ in range(s["epochs"]):
            for b in torch.randperm(len(X)).split(s["batch"]):
                q = X[b] + X[b] @ W
                q = q / q.norm(dim=-1, keepdim=True)
                sims = q @ M.T
                if best is not None:  # a chunk is as near as its nearest article
                    sims = best(sims)
                logp = torch.log_softmax(sims / s["temperature"], -1)
                loss = -(T[b] * logp).sum(-1)
                if N[b].any():  # -log(1 - p) over the chunks marked wrong
                    loss = loss - neg_weight * (N[b] * torch.log1p(-logp.exp().clamp(max=1 - 1e-6))).sum(-1)
                loss = loss.mean() + s["l2"] * (W ** 2).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()


def _best_row(view: DenseView, torch):
    """(questions, rows) similarities -> (questions, chunks), each chunk's best row, for autograd."""
    groups = view.groups()
    width = max(len(g) for g in groups)
    pad = view.matrix.shape[0]  # an extra column of -inf
    index = torch.tensor([g + [pad] * (width - len(g)) for g in groups])

    def best(sims):
        ext = torch.cat([sims, torch.full((sims.shape[0], 1), float("-inf"))], 1)
        return ext[:, index].max(-1).values

    return best


def dense_recall(vectors: np.ndarray, golds: list[list[list[int]]], corpus: np.ndarray | DenseView, k: int) -> float:
    """Share of gold spans with a chunk among the k nearest chunks of the whole collection (each question
    weighing 1, its golds 1/n), the view the adapter changes."""
    scores = corpus.chunk_scores(vectors) if isinstance(corpus, DenseView) else vectors @ corpus.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    per_q = [np.mean([any(i in set(t) for i in g) for g in gs]) for t, gs in zip(top.tolist(), golds) if gs]
    return float(np.mean(per_q)) if per_q else 0.0


def training_record(*, qa: Path | None, split: str | None, questions: int, corpus_hash: str, model: str,
                    max_chars: int, seed: int, fit_s: float, embed_s: float, pairs: int, chunks: int,
                    unit: str = "chunk", feedback: dict | None = None, mined: dict | None = None) -> dict:
    """What an artefact says of its training run. Its version hashes what decides the matrix (data, unit,
    settings, seed), so the same inputs give the same version."""
    rec = {"kind": "query-adapter", "model": model, "qa": Path(qa).name if qa else None,
           "qa_sha256": hashlib.sha256(Path(qa).read_bytes()).hexdigest() if qa else None,
           "split": split or "all", "questions": questions, "pairs": pairs, "corpus_sha256": corpus_hash,
           "chunks": chunks, "unit": unit, "rescore_query_chars": max_chars, "fit": FIT, "seed": seed,
           "fit_s": round(fit_s, 2), "embed_s": round(embed_s, 2),
           "trained_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "python": platform.python_version()}
    keys = ["model", "qa_sha256", "split", "corpus_sha256", "rescore_query_chars", "fit", "seed"]
    if unit != "chunk":  # a chunk-unit artefact keeps the version it had before units existed
        keys.append("unit")
    for name, part in (("feedback", feedback), ("mined", mined)):
        if part:
            rec[name] = part
            keys.append(name)
    if feedback:
        rec["neg_weight"] = NEG_WEIGHT
    digest = hashlib.sha256(json.dumps({k: rec[k] for k in keys}, sort_keys=True).encode()).hexdigest()
    rec["version"] = f"a1-{digest[:8]}"
    return rec


def corpus_hash(docs) -> str:
    return hashlib.sha256("".join(sorted(d.content_hash for d in docs)).encode()).hexdigest()


def _with_feedback(examples: tuple, feedback, view: Corpus, rescorer, max_chars: int) -> tuple[tuple, dict]:
    """(vectors, golds, negatives) with the ledger's marked answers added (feedback_pairs.Feedback.examples),
    and its part of the record."""
    vectors, golds, negatives = examples
    fb_vectors, fb_golds, fb_negs, part = feedback.examples(view, rescorer, max_chars)
    vectors = np.concatenate([v for v in (vectors, fb_vectors) if v.size]) if fb_golds else vectors
    return (vectors, golds + fb_golds, negatives + fb_negs), part


def _gold_pairs(golds: list[list[list[int]]]) -> int:
    """(question, gold) pairs the fit learns from: golds no chunk holds teach nothing."""
    return sum(1 for gs in golds for g in gs if g)


def _with_mined(examples: tuple, mined: int, docs: list, rel: dict[str, str], seed: int, view: Corpus, rescorer,
                max_chars: int) -> tuple[tuple, dict]:
    """(vectors, golds, negatives) with `mined` pairs mined from the corpus's own text added, and what was
    mined (pairs, by kind) for the record."""
    from rag_app.evaluation.mined_pairs import mine

    vectors, golds, negatives = examples
    pairs = mine([(rel[d.source_path], d.text) for d in docs], mined, seed)
    m_vectors = question_vectors(pairs, rescorer, max_chars)
    vectors = np.concatenate([v for v in (vectors, m_vectors) if v.size])
    added = (vectors, golds + [view.gold_rows(q) for q in pairs], negatives + [[] for _ in pairs])
    return added, {"pairs": len(pairs), "kinds": dict(sorted(_count(q.task for q in pairs).items()))}


def _in_sample_recall(vectors: np.ndarray, golds: list, view: Corpus, W: np.ndarray) -> dict[str, float]:
    """Dense-view recall@20 of the training questions before and after the map: in sample, so not a quality
    figure; it says the fit did something (bench/adapter_cv.py measures)."""
    return {"before": round(dense_recall(vectors, golds, view.view, 20), 4),
            "after": round(dense_recall(adapt(vectors, W), golds, view.view, 20), 4)}


def train(app, qa: Path | None, corpus: Path, *, split: str | None = "tune", seed: int = SEED, progress=None,
          feedback=None, mined: int = 0, validate_on: str | None = None) -> tuple[Path, dict]:
    """`rag train-adapter`: the split's questions over the eval collection of the `legal` chunker (built as
    `rag eval` builds it, every vector its unit reads included), a fitted map, and the artefact under
    RAG_DATA_DIR/adapters. `feedback`: a feedback_pairs.Feedback read from the ledger (answers marked right
    add their cited passages as golds, answers marked wrong their cited passages as negatives). `mined`:
    that many pairs mined from the corpus's own text (rag_app/evaluation/mined_pairs.py). `validate_on`: a
    split of `qa` not trained on whose dense-view recall goes in the record (before and after).
    Returns (the artefact's path, its training record)."""
    from rag_app.evaluation.harness import training_set

    questions, docs, rel, info, params, rescorer = training_set(app, qa, corpus, split, progress)
    t0 = time.perf_counter()
    unit = params.rescore_unit
    view = Corpus.of(app.store, info.name, rescorer, rel, unit)
    vectors = question_vectors(questions, rescorer, params.rescore_query_chars)
    golds = [view.gold_rows(q) for q in questions]
    negatives: list[list[int]] = [[] for _ in questions]
    fb_part = None
    if feedback is not None:
        (vectors, golds, negatives), fb_part = _with_feedback((vectors, golds, negatives), feedback, view, rescorer,
                                                              params.rescore_query_chars)
    mined_part = None
    if mined:
        (vectors, golds, negatives), mined_part = _with_mined((vectors, golds, negatives), mined, docs, rel, seed,
                                                              view, rescorer, params.rescore_query_chars)
    embed_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    W = fit(vectors, golds, view.view, seed, negatives=negatives)
    fit_s = time.perf_counter() - t0
    record = training_record(qa=qa, split=split, questions=len(questions), corpus_hash=corpus_hash(docs),
                             model=rescorer.model_name, max_chars=params.rescore_query_chars, seed=seed,
                             fit_s=fit_s, embed_s=embed_s, pairs=_gold_pairs(golds),
                             chunks=len(view.ids), unit=unit, feedback=fb_part, mined=mined_part)
    n = len(questions)
    if n:
        record["in_sample_dense_recall_at_20"] = _in_sample_recall(vectors[:n], golds[:n], view, W)
    if validate_on and qa is not None:
        record["validate"] = held_out_metrics(app, qa, corpus, validate_on, view, rescorer, params, W)
    path = save_adapter(W, record, app.settings.data_dir / "adapters")
    return path, record


def held_out_metrics(app, qa: Path, corpus: Path, split: str, view: Corpus, rescorer, params, W) -> dict:
    """Dense-view recall@5/20 on a split the fit did not read, before and after the map, overall and for
    layperson questions (seconds: no query chain runs; bench/adapter_cv.py runs the whole chain)."""
    from rag_app.evaluation.harness import EvalSpec, eval_questions

    held = eval_questions(EvalSpec(qa=qa, corpus=corpus, chunkers=["legal"], split=split))
    vectors = question_vectors(held, rescorer, params.rescore_query_chars)
    golds = [view.gold_rows(q) for q in held]
    out: dict = {"split": split, "questions": len(held)}
    lay = [i for i, q in enumerate(held) if q.task == "layperson_consultation"]
    for group, idx in (("all", list(range(len(held)))), ("layperson", lay)):
        if not idx:
            continue
        v, g = vectors[idx], [golds[i] for i in idx]
        out[group] = {f"dense_recall@{k}": {"before": round(dense_recall(v, g, view.view, k), 4),
                                             "after": round(dense_recall(adapt(v, W), g, view.view, k), 4)}
                      for k in (5, 20)}
    return out


def _count(items) -> dict:
    out: dict = defaultdict(int)
    for x in items:
        out[x] += 1
    return out


def pseudo_gold(doc: str, start: int, end: int) -> Gold:
    return Gold(doc, start, end)
