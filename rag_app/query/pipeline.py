"""What one query path needs, in one place: its settings (`QueryConfig`) and its components
(`Pipeline`: store, collection, models, pricer), built once by the composition root (rag_app/app.py) and
wired into runnables by chains/rag.py. Each component that loads on first use is handed in as a
`Provider` (rag_app/core/ports.py), so a question asks its parts, never the composition root. `rag ask`, `rag serve` and `rag eval` run the same Pipeline
shape: eval only points it at its own collection and retriever and leaves out the LLM.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from rag_app.query.adapter import adapter_path
from rag_app.query.levers import LeverParams
from rag_app.query.ranker import latest_ranker
from rag_app.core.ports import Embedder, Pricer, Provider, ReplyStats, Reranker
from rag_app.store import CollectionInfo, VectorStore


def ranker_path(setting: str, data_dir: Any) -> str:
    """RAG_RANKER as a file path: `latest` is the newest artefact under RAG_DATA_DIR/rankers ('' if none)."""
    if setting.strip() == "latest":
        found = latest_ranker(data_dir)
        return str(found) if found else ""
    return setting.strip()


@dataclass(frozen=True)
class QueryConfig:
    retriever: str = "hybrid"  # hybrid | dense | bm25
    levers: str = "auto"  # RAG_RETRIEVAL_LEVERS: auto | none | '+'-joined lever names
    lever_params: LeverParams = field(default_factory=LeverParams)
    top_k: int = 20
    top_n: int = 10
    rrf_k: int = 60
    rrf_dense_weight: float = 1.0
    rrf_sparse_weight: float = 1.0
    rescore_wait_s: float | None = 10.0  # None: wait for a busy rescore embedder as long as it takes (eval)
    rescore_embed_missing: bool = False  # False: rescore orders the candidates ingest made vectors for, embeds none
    cite: bool = True  # the article a question cites goes first
    table_weight: float = 1.5
    attach_refs: int = 0
    context_tokens: int = 1000
    rerank_model: str | None = None  # what a skipped rerank row names
    prompt_version: str = "v1"
    llm_model: str = "gpt-4o-mini"
    llm_max_tokens: int | None = 512
    llm_max_retries: int = 2
    llm_retry_base_s: float = 0.5
    use_llm: bool = False  # False: extractive answers, the generate row prices the prompt as shadow
    rewrite: bool = False  # the rewrite lever: the LLM turns the question into the statutes' terms first
    rewrite_prompt_version: str = "v1"
    rewrite_max_retries: int = 1
    rewrite_max_tokens: int = 128

    @classmethod
    def from_settings(cls, s: Any) -> QueryConfig:
        return cls(retriever=s.retriever, levers=s.retrieval_levers,
                   lever_params=LeverParams(rescore_model=s.rescore_model, ranker=ranker_path(s.ranker, s.data_dir),
                                            query_adapter=adapter_path(s.query_adapter, s.data_dir, s.rescore_model,
                                                                       s.retrieval_levers.split("+")),
                                            rescore_unit=s.rescore_unit),
                   top_k=s.top_k, top_n=s.top_n,
                   rrf_k=s.rrf_k, rrf_dense_weight=s.rrf_dense_weight, rrf_sparse_weight=s.rrf_sparse_weight,
                   rescore_wait_s=s.rescore_wait_s, rescore_embed_missing=s.rescore_vectors == "query",
                   table_weight=s.table_weight, attach_refs=s.attach_refs,
                   context_tokens=s.context_tokens, rerank_model=s.rerank_model, prompt_version=s.prompt_version,
                   llm_model=s.llm_model, llm_max_tokens=s.llm_max_tokens, llm_max_retries=s.llm_max_retries,
                   llm_retry_base_s=s.llm_retry_base_s, use_llm=s.use_llm, rewrite=s.rewrites,
                   rewrite_prompt_version=s.query_rewrite_prompt_version,
                   rewrite_max_retries=s.query_rewrite_max_retries, rewrite_max_tokens=s.query_rewrite_max_tokens)

    def with_(self, **changes: Any) -> QueryConfig:
        return replace(self, **changes)


@dataclass(frozen=True)
class Pipeline:
    """The components of one query path, built. Models load on first use (`rag report` never pays for torch),
    so those come as providers (`get()`: the same object every time), each owning its loader."""

    config: QueryConfig
    store: VectorStore
    collection: Provider[CollectionInfo]  # checked against the models before it is returned
    embedder: Provider[Embedder]
    rescorer: Provider[Embedder | None]  # the rescore lever's embedder; None when it cannot load
    reranker: Provider[tuple[Reranker | None, str | None]]  # (reranker, or why the stage is skipped)
    chat_model: Provider[Any]  # a LangChain chat model; only asked when config.use_llm
    pricer: Pricer
    reply_stats: ReplyStats
    # the rewrite lever's chat model (the answer's endpoint and model, its own timeout); asked when config.rewrite
    rewrite_model: Provider[Any] | None = None

    def with_config(self, config: QueryConfig) -> Pipeline:
        return replace(self, config=config)
