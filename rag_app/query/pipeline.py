"""What one query path needs, in one place: its settings (`QueryConfig`) and its components
(`Pipeline`: store, collection, models, pricer), built once by the composition root (rag_app/app.py) and
wired into runnables by chains/rag.py. Each component that loads on first use is handed in as a
`Provider` (rag_app/core/ports.py), so a question asks its parts, never the composition root. `rag ask`, `rag serve` and `rag eval` run the same Pipeline
shape: eval only points it at its own collection and retriever and leaves out the LLM.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from rag_app.query.adapter import adapter_path
from rag_app.query.knobs import QueryKnobs
from rag_app.query.ranker import latest_ranker
from rag_app.core import Embedder, Pricer, Provider, ReplyStats, Reranker
from rag_app.store import CollectionInfo, VectorStore


def ranker_path(setting: str, data_dir: Any) -> str:
    """RAG_RANKER as a file path: `latest` is the newest artefact under RAG_DATA_DIR/rankers ('' if none)."""
    if setting.strip() == "latest":
        found = latest_ranker(data_dir)
        return str(found) if found else ""
    return setting.strip()


class QueryConfig(QueryKnobs):
    """The query path's settings for one question: the knobs (rag_app/query/knobs.py) under their own names,
    `ranker` and `query_adapter` resolved to files, and what only a run decides."""

    use_llm: bool = False  # False: extractive answers, the generate row prices the prompt as shadow
    cite: bool = True  # the article a question cites goes first (`rag eval --no-cite` turns it off)

    @classmethod
    def from_settings(cls, s: Any) -> QueryConfig:
        """The settings' knobs copied as they are, `latest`/`auto` read as the files they name."""
        knobs = {name: getattr(s, name) for name in QueryKnobs.model_fields}
        return cls.model_validate({**knobs, "ranker": ranker_path(s.ranker, s.data_dir),
                                   "query_adapter": adapter_path(s.query_adapter, s.data_dir, s.rescore_model,
                                                                 s.retrieval_levers.split("+")),
                                   "use_llm": s.use_llm})

    def with_(self, **changes: Any) -> QueryConfig:
        """This configuration with some knobs changed; a name that is no knob is an error, never ignored."""
        unknown = sorted(set(changes) - set(type(self).model_fields))
        if unknown:
            raise TypeError(f"QueryConfig has no setting {', '.join(unknown)}")
        return self.model_copy(update=changes)


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
    # the rewrite lever's chat model (the answer's endpoint and model, its own timeout); asked when config.rewrites
    rewrite_model: Provider[Any] | None = None

    def with_config(self, config: QueryConfig) -> Pipeline:
        return replace(self, config=config)
