"""A learned ranker over the candidate views: each candidate chunk (the union of every view's top
`pool_depth`, rag_app/query/views.py) is described by numbers (each view's rank and score, its law's
standing among the candidates, length, position and structure, word overlap with the question), and a
gradient-boosted model trained on questions with gold spans (`rag train-ranker`) scores it. Nothing here
is a hand-set weight: the model learns how the views combine.

The artefact is one file, `RAG_DATA_DIR/rankers/ranker-<version>.joblib`: the fitted model, the feature
names it was fitted on and its training record. Its version names the data and settings it was trained
from; the retrieve row names it (`+ranker(<version>)`).
"""
from __future__ import annotations

import math
import re
import threading
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag_app.core import Embedder
from rag_app.core import ScoredChunk
from rag_app.core import EmbedUsage
from rag_app.query.knobs import QueryKnobs
from rag_app.query.levers import Bounded
from rag_app.query.retrieval import cited_laws
from rag_app.query.views import Views, candidate_views
from rag_app.store import CollectionInfo, VectorStore
from rag_app.text import sparse

FEATURE_VERSION = 1
FEATURES = (
    "bm25_rank", "bm25_score", "bmc_rank", "bmc_score", "dense_rank", "cos", "cos_gap", "cos_rank",
    "cite", "charge_score", "charge_pick", "named_rank", "expand_rank", "views_top20", "rrf",
    "law_bm25", "law_cos", "law_share", "law_cited",
    "tokens", "position", "is_article", "refs_in", "n_refs",
    "q_bigrams_in_chunk", "chunk_bigrams_in_q", "q_bigrams_in_title", "q_chars",
)
ABSENT = 1000.0  # the rank of a chunk a view did not propose


def _bigrams(text: str) -> set[str]:
    text = re.sub(r"[\s，,。；;：:、（）()《》“”\"？?！!]", "", text)
    return {text[i:i + 2] for i in range(len(text) - 1)}


def pool_of(v: Views, depth: int) -> list[str]:
    """The candidates the ranker scores: every view's top `depth`, in first-seen order."""
    seen: dict[str, None] = {}
    for name, lst in v.ranked.items():
        seen.update(dict.fromkeys(c for c, _ in lst[:depth]))
    return list(seen)


def _ranks(lst: list[tuple[str, float]]) -> tuple[dict[str, int], dict[str, float]]:
    top = lst[0][1] if lst and lst[0][1] > 0 else 1.0
    return {c: i for i, (c, _) in enumerate(lst, 1)}, {c: s / top for c, s in lst}


def doc_lengths(store, name: str) -> dict[str, int]:
    """Each document's extent (its last chunk's end), for a chunk's relative position."""
    def build() -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for p in store.all_payloads(name):
            out[p["doc_id"]] = max(out[p["doc_id"]], int(p["char_end"]))
        return dict(out)
    return store.derived(name, "doc_lengths", build)


def features(question: str, v: Views, pool: list[str], lengths: dict[str, int], titles: list[str]) -> np.ndarray:
    """One row of FEATURES per candidate of `pool` (float32)."""
    ctx = _PoolContext.of(question, v, pool, titles)
    rows = [ctx.row(c, v.payloads[c], lengths) for c in pool]
    return np.asarray(rows, dtype=np.float32).reshape(len(pool), len(FEATURES))


def _law_strength(by_doc: dict[str, list[str]], score: dict[str, float]) -> tuple[dict[str, float], float]:
    """Each law's best three chunks' summed score among the candidates, and the largest (never 0)."""
    per = {d: sum(sorted((score.get(c, 0.0) for c in cs), reverse=True)[:3]) for d, cs in by_doc.items()}
    return per, max(per.values(), default=1.0) or 1.0


def _pointed_at(v: Views, top20: list[set[str]]) -> dict[tuple[str, str], int]:
    """Structure: how many strong candidates of a law point at each of its articles (违反本法第X条 ...)."""
    pointed: dict[tuple[str, str], int] = defaultdict(int)
    for c in set().union(*top20) if top20 else ():
        p = v.payloads[c]
        for ref in p.get("refs") or ():
            pointed[(p["doc_id"], ref)] += 1
    return pointed


@dataclass
class _PoolContext:
    """What every candidate's row is read against: each view's ranks and scores, the pool's cosines,
    the candidates' laws and the question's bigrams."""

    question: str
    pool_size: int
    bm25: tuple[dict[str, int], dict[str, float]]
    bmc: tuple[dict[str, int], dict[str, float]]
    dense_r: dict[str, int]
    named_r: dict[str, int]
    expand_r: dict[str, int]
    cite: set[str]
    charge: dict[str, float]
    picks: set[str]
    cos: dict[str, float]
    best_cos: float
    cos_order: dict[str, int]
    top20: list[set[str]]
    by_doc: dict[str, list[str]]
    law_bm: tuple[dict[str, float], float]
    law_cs: tuple[dict[str, float], float]
    named_laws: set[str]
    pointed: dict[tuple[str, str], int]
    qgrams: set[str]

    @classmethod
    def of(cls, question: str, v: Views, pool: list[str], titles: list[str]) -> _PoolContext:
        bmc = _ranks(v.ranked.get("bm25+colloquial", []))
        cos = v.cosine or {}
        top20 = [set(v.ids(n, 20)) for n in v.ranked]
        by_doc: dict[str, list[str]] = defaultdict(list)  # the candidate's law among the candidates
        for c in pool:
            by_doc[v.payloads[c]["doc_id"]].append(c)
        return cls(
            question, len(pool), _ranks(v.ranked.get("bm25", [])), bmc, _ranks(v.ranked.get("dense", []))[0],
            _ranks(v.ranked.get("named", []))[0], _ranks(v.ranked.get("expand", []))[0], set(v.ids("cite")),
            dict(v.ranked.get("charge", [])), set(v.charge_picks), cos,
            max((cos.get(c, 0.0) for c in pool), default=0.0),
            {c: i for i, c in enumerate(sorted(pool, key=lambda c: -cos.get(c, 0.0)), 1)}, top20, by_doc,
            _law_strength(by_doc, bmc[1]), _law_strength(by_doc, cos),
            set(cited_laws(sparse.normalize_query(question), titles)), _pointed_at(v, top20), _bigrams(question))

    def row(self, c: str, p: dict, lengths: dict[str, int]) -> tuple[float, ...]:
        """The candidate's FEATURES, in their order."""
        (bm25_r, bm25_s), (bmc_r, bmc_s), cos = self.bm25, self.bmc, self.cos
        text_grams = _bigrams(p["text"])
        title_grams = _bigrams(" ".join([p["title"], *p.get("heading_path", [])]))
        br, cr, dr = bm25_r.get(c, ABSENT), bmc_r.get(c, ABSENT), self.dense_r.get(c, ABSENT)
        doc, q = p["doc_id"], self.qgrams
        return (
            br, bm25_s.get(c, 0.0), cr, bmc_s.get(c, 0.0), dr, cos.get(c, 0.0), self.best_cos - cos.get(c, 0.0),
            self.cos_order[c], float(c in self.cite), self.charge.get(c, 0.0), float(c in self.picks),
            self.named_r.get(c, ABSENT), self.expand_r.get(c, ABSENT), float(sum(c in t for t in self.top20)),
            1 / (60 + cr) + 1 / (60 + dr),
            self.law_bm[0][doc] / self.law_bm[1], self.law_cs[0][doc] / self.law_cs[1],
            len(self.by_doc[doc]) / self.pool_size, float(p["title"] in self.named_laws),
            float(p["token_count"]), p["char_start"] / max(lengths.get(doc, 1), 1),
            float(bool(p.get("article_nums"))),
            float(sum(self.pointed[(doc, a)] for a in p.get("article_nums") or ())), float(len(p.get("refs") or ())),
            len(q & text_grams) / max(len(q), 1), len(q & text_grams) / max(len(text_grams), 1),
            len(q & title_grams) / max(len(q), 1), math.log1p(len(self.question)),
        )


@dataclass(frozen=True)
class Ranker:
    """A fitted model and what it needs to score candidates the way it was trained."""

    model: object
    version: str
    pool_depth: int
    feature_names: tuple[str, ...]
    record: dict  # the training run: time, data, settings, metrics

    def order(self, question: str, v: Views, lengths: dict[str, int], titles: list[str]) -> list[tuple[str, float]]:
        """(chunk id, score) for every candidate, best first (ties keep the views' order)."""
        pool = pool_of(v, self.pool_depth)
        if not pool:
            return []
        if self.feature_names != FEATURES:
            raise ValueError(f"ranker {self.version} was trained on other features; run `rag train-ranker` again")
        scores = predict(self.model, features(question, v, pool, lengths, titles))
        order = np.argsort(-scores, kind="stable")
        return [(pool[i], float(scores[i])) for i in order]


def predict(model: object, X: np.ndarray) -> np.ndarray:
    """P(gold) per row. On one thread: scikit-learn opens an OpenMP region per tree, and for a question's
    ~80 rows the threads' start-up cost more than the trees (300 trees took ~670 ms of a question on 2
    busy cores; on one thread a few ms)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="openmp"):
        return model.predict_proba(X)[:, 1]  # type: ignore[attr-defined, no-any-return]


_loaded: dict[str, Ranker] = {}
_lock = threading.Lock()


def load_ranker(path: str | Path) -> Ranker:
    """The artefact at `path`, loaded once per process. It is a pickle (joblib): load only files that
    `rag train-ranker` wrote into your own data dir."""
    import joblib

    from rag_app.core import ConfigError

    if not path or not Path(path).is_file():
        raise ConfigError(f"the ranker lever needs a trained ranker (RAG_RANKER={str(path)!r} is not a file): "
                          "run `rag train-ranker`, then set RAG_RANKER=latest or the .joblib path it printed")
    key = str(Path(path).resolve())
    with _lock:
        if key not in _loaded:
            data = joblib.load(key)
            _loaded[key] = Ranker(data["model"], data["version"], int(data["pool_depth"]),
                                  tuple(data["feature_names"]), data["record"])
        return _loaded[key]


def search_ranked(store: VectorStore, info: CollectionInfo, question: str, *, ranker: Ranker,
                  embeddings: Embedder | None, params: QueryKnobs, top_k: int, cite: bool = True,
                  where: dict[str, list[str]] | None = None, embed_missing: bool = True,
                  charge_first: bool = True, wait_s: float | None = None) -> tuple[list[ScoredChunk], EmbedUsage]:
    """The `ranker` lever's retrieval: every candidate view, ordered by the model, then (as in the default)
    the named charges' chunks and the cited article first. Returns (top-k ScoredChunks, what embedding the
    question cost). Raises RescoreBusy when the embedder stays busy past `wait_s` (RAG_RESCORE_WAIT_S;
    None: as long as it takes)."""
    from rag_app.query.retrieval import put_first, ranked_chunks

    bounded = Bounded(embeddings, wait_s) if embeddings is not None else None
    v = candidate_views(store, info, question, depth=ranker.pool_depth, embeddings=bounded, params=params,
                        embed_missing=embed_missing, where=where)
    ordered = ranker.order(question, v, doc_lengths(store, info.name), store.titles(info.name))
    if charge_first and v.charge_picks:
        ordered = put_first(ordered, list(v.charge_picks))
    return ranked_chunks(store, info, question, ordered, v.payloads, top_k, cite, where), v.embedded


def latest_ranker(data_dir: str | Path) -> Path | None:
    """The newest artefact `rag train-ranker` wrote under `data_dir/rankers`, or None."""
    found = sorted(Path(data_dir, "rankers").glob("ranker-*.joblib"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None
