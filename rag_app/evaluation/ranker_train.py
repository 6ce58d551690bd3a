"""Training the learned ranker (rag_app/query/ranker.py): candidate features for questions with gold
spans, query-passage pairs mined from the corpus itself, a gradient-boosted classifier with a fixed
seed, and the versioned artefact `rag train-ranker` writes.

Pseudo-questions mined from the corpus (no list typed by anyone): each article's first clause without
its label (`第五十七条 一人有限责任公司的设立和组织机构，适用本节规定。` -> `一人有限责任公司的设立和组织机构`),
with the article it opens as gold, a seeded sample of `pseudo` of them. They teach the model what a
statute-worded question looks like next to its article; the user's own questions come from the QA file.
"""
from __future__ import annotations

import hashlib
import json
import platform
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag_app.core import Chunk
from rag_app.evaluation.hits import Ranked, covers
from rag_app.evaluation.qa import Gold, Question
from rag_app.query import QueryKnobs
from rag_app.query import FEATURE_VERSION, FEATURES, doc_lengths, features, pool_of, predict
from rag_app.query import candidate_views

SEED = 0
_LABEL = re.compile(r"^\s*第[一二三四五六七八九十百千零〇\d]+\s*条(?:之[一二三四五六七八九十]+)?\s*")
_CLAUSE = re.compile(r"[，。；：]")


@dataclass
class Sample:
    """One question's candidates: features, labels (covers a gold span) and the spans the hit rule reads."""

    qid: str
    task: str
    question: Question
    ids: list[str]
    X: np.ndarray
    y: np.ndarray
    ranked: list[Ranked]  # the pool, in the views' order, as the budget rule reads it
    first: list[int]  # positions in the pool of what goes first whatever the model says: cited article, charges


def pseudo_questions(payloads: list[dict], rel: dict[str, str], n: int, seed: int = SEED) -> list[Question]:
    """Up to `n` (seeded sample) article openings as questions, each with its article's span as gold. A
    chunk may hold several articles: each one that starts in it at a line start counts."""
    out = []
    for p in sorted(payloads, key=lambda p: p["chunk_id"]):
        if p["source_path"] not in rel:
            continue
        text, starts, at = p["text"], [], 0
        for line in text.splitlines(keepends=True):
            if _LABEL.match(line):
                starts.append(at)
            at += len(line)
        for i, a in enumerate(starts):
            b = starts[i + 1] if i + 1 < len(starts) else len(text)
            body = _LABEL.sub("", text[a:b].split("\n", 1)[0])
            clause = _CLAUSE.split(body, maxsplit=1)[0].strip()
            if 6 <= len(clause) <= 60:
                out.append(Question(f"pseudo-{p['chunk_id']}-{i}", clause, "pseudo_article_opening",
                                    (Gold(rel[p["source_path"]], p["char_start"] + a, p["char_start"] + b),)))
    random.Random(seed).shuffle(out)
    return out[:n]


def collect(store, info, questions: list[Question], rel: dict[str, str], embeddings, params: QueryKnobs,
            pool_depth: int, progress=None) -> list[Sample]:
    """Every question's candidate pool with its features and labels."""
    lengths = doc_lengths(store, info.name)
    titles = store.titles(info.name)
    out = []
    for i, q in enumerate(questions, 1):
        v = candidate_views(store, info, q.question, depth=pool_depth, embeddings=embeddings, params=params)
        ids = pool_of(v, pool_depth)
        ranked = []
        for c in ids:
            ch = Chunk.from_payload(v.payloads[c])
            ranked.append(Ranked(rel.get(ch.source_path, ch.source_path), ch.char_start, ch.char_end,
                                 ch.token_count, 0.0, ch.text))
        y = np.array([any(covers(r.doc, r.char_start, r.char_end, g) for g in q.gold) for r in ranked], dtype=np.int8)
        X = features(q.question, v, ids, lengths, titles) if ids else np.zeros((0, len(FEATURES)), np.float32)
        # as the lever orders them (ranker.search_ranked): the cited article, then each charge's chunk
        pos = {c: i for i, c in enumerate(ids)}
        first = [pos[c] for c in dict.fromkeys([*v.ids("cite", 5), *v.charge_picks]) if c in pos]
        out.append(Sample(q.id, q.task, q, ids, X, y, ranked, first))
        if progress:
            progress("ranker features", i, len(questions))
    return out


def fit_params() -> dict:
    return {"max_iter": 300, "learning_rate": 0.05, "max_leaf_nodes": 15, "min_samples_leaf": 40,
            "l2_regularization": 1.0}


def fit(samples: list[Sample], seed: int = SEED, **params):
    """A gradient-boosted classifier (scikit-learn, fixed seed) on every candidate of `samples`."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    X = np.concatenate([s.X for s in samples if len(s.ids)])
    y = np.concatenate([s.y for s in samples if len(s.ids)])
    settings = {**fit_params(), **params}
    model = HistGradientBoostingClassifier(random_state=seed, early_stopping=False, **settings)
    model.fit(X, y)
    return model


def order_by(model, s: Sample, first: bool = True) -> list[Ranked]:
    """The sample's pool ranked by the model, best first; with `first`, the cited article and the charges'
    chunks ahead of it, as the `ranker` lever serves them."""
    if not s.ids:
        return []
    scores = predict(model, s.X)
    order = list(dict.fromkeys([*(s.first if first else []), *np.argsort(-scores, kind="stable").tolist()]))
    return [s.ranked[i] for i in order]


def version_of(record: dict) -> str:
    """A short name for what the model was trained from: features, data, settings, seed."""
    keys = ("feature_version", "features", "qa_sha256", "split", "pseudo", "corpus_sha256", "pool_depth",
            "model_params", "seed")
    digest = hashlib.sha256(json.dumps({k: record.get(k) for k in keys}, sort_keys=True).encode()).hexdigest()
    return f"v{FEATURE_VERSION}-{digest[:8]}"


def save(model, record: dict, out_dir: Path) -> tuple[Path, dict]:
    """`out_dir/ranker-<version>.joblib` (the model and its record) and `.json` beside it (the record)."""
    import joblib

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"ranker-{record['version']}.joblib"
    joblib.dump({"model": model, "version": record["version"], "pool_depth": record["pool_depth"],
                 "feature_names": list(FEATURES), "record": record}, path, compress=3)
    record = {**record, "artefact_bytes": path.stat().st_size}
    path.with_suffix(".json").write_text(json.dumps(record, ensure_ascii=False, indent=1), encoding="utf-8")
    return path, record


def training_record(*, qa: Path, split: str | None, questions: int, pseudo: int, corpus_hash: str,
                    pool_depth: int, model_params: dict, seed: int, fit_s: float, features_s: float,
                    positives: int, rows: int) -> dict:
    rec = {"feature_version": FEATURE_VERSION, "features": list(FEATURES), "qa": str(qa),
           "qa_sha256": hashlib.sha256(Path(qa).read_bytes()).hexdigest(), "split": split or "all",
           "questions": questions, "pseudo": pseudo, "corpus_sha256": corpus_hash, "pool_depth": pool_depth,
           "model": "sklearn.HistGradientBoostingClassifier", "model_params": model_params, "seed": seed,
           "rows": rows, "positives": positives, "fit_s": round(fit_s, 2), "features_s": round(features_s, 2),
           "trained_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "python": platform.python_version()}
    rec["version"] = version_of(rec)
    return rec


def train(app, qa: Path, corpus: Path, *, split: str | None = "tune", pseudo: int = 1000, pool_depth: int = 50,
          seed: int = SEED, progress=None) -> tuple[Path, dict]:
    """`rag train-ranker`: features for the split's questions and `pseudo` mined pseudo-questions over the
    eval collection of the `legal` chunker (built as `rag eval` builds it), a fitted model, and the artefact
    under RAG_DATA_DIR/rankers. Returns (its path, its training record)."""
    from rag_app.evaluation.budget import recall_within
    from rag_app.evaluation.harness import training_set

    questions, docs, rel, info, params, rescorer = training_set(app, qa, corpus, split, progress)
    t0 = time.perf_counter()
    samples = collect(app.store, info, questions, rel, rescorer, params, pool_depth, progress)
    mined = pseudo_questions(app.store.all_payloads(info.name), rel, pseudo, seed) if pseudo else []
    extra = collect(app.store, info, mined, rel, rescorer, params, pool_depth, progress)
    features_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = fit(samples + extra, seed)
    fit_s = time.perf_counter() - t0
    rows = sum(len(s.ids) for s in samples + extra)
    positives = int(sum(int(s.y.sum()) for s in samples + extra))
    corpus_hash = hashlib.sha256("".join(sorted(d.content_hash for d in docs)).encode()).hexdigest()
    record = training_record(qa=qa, split=split, questions=len(questions), pseudo=len(mined), corpus_hash=corpus_hash,
                             pool_depth=pool_depth, model_params=fit_params(), seed=seed, fit_s=fit_s,
                             features_s=features_s, positives=positives, rows=rows)
    inside = [recall_within(s.question, order_by(model, s)[:20], 1000) for s in samples]
    record["in_sample_recall_within_1000"] = round(sum(inside) / max(len(inside), 1), 4)  # not a quality figure
    return save(model, record, app.settings.data_dir / "rankers")
