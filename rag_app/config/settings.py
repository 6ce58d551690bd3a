"""Settings from environment variables (beat) `.env` (beat) defaults. Built on demand, never at import.

Names without the RAG_ prefix (OPENAI_API_KEY, OPENAI_BASE_URL, QDRANT_URL, QDRANT_API_KEY) are the
ones the wider ecosystem already uses, so a user's existing environment just works.
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, BaseModel, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from rag_app.core import ConfigError
from rag_app.query import QueryKnobs

if TYPE_CHECKING:
    from rag_app.config.ledger_location import LedgerTarget

log = logging.getLogger(__name__)

SECRET_FIELDS = ("qdrant_api_key", "rerank_api_key", "openai_api_key", "judge_api_key", "api_token",
                 "alert_webhook")  # a Slack-style webhook URL is a secret
# The server addresses checked at start-up, each with an example of the expected form.
_URL_EXAMPLES = {"qdrant_url": "http://localhost:6333", "openai_base_url": "http://127.0.0.1:8080/v1",
                 "rerank_url": "https://api.jina.ai/v1/rerank", "judge_base_url": "http://127.0.0.1:8080/v1"}


class _Places(BaseModel):
    """where things live"""

    data_dir: Path = Field(Path(".rag"), description="embedded Qdrant store, ledger.sqlite and the embedding cache "
                           "go here")
    collection: str = Field("legal", description="Qdrant collection to ingest into and query")
    variant: str = Field("default", description="label written on every ledger row (gray releases compare these)")
    experiment: str | None = Field(None, description="experiment name written on every ledger row (optional)")


class _Ledger(BaseModel):
    """ledger

    Where it lives, and what keeps its rows while a disk cannot be written."""

    ledger_url: str | None = Field(
        None, description="where the cost ledger lives: unset = RAG_DATA_DIR/ledger.sqlite; "
        "sqlite:////abs/path/ledger.sqlite; or postgresql://USER:PASSWORD@HOST:5432/DB (one ledger for many "
        "`rag serve` replicas; same migrations)")
    ledger_buffer_rows: int = Field(10_000, ge=1, description="rows kept in memory while the ledger cannot be "
                                    "written (disk full, read-only)")
    ledger_spill_dir: Path | None = Field(None, description="past that bound, rows go to a private spill file here "
                                          "(default: RAG_DATA_DIR/spill)")
    ledger_spill_fallback_dir: Path | None = Field(None, description="when the spill dir's disk is full, spill "
                                                   "here instead (best on another disk)")
    ledger_direct_timeout_s: float = Field(1.0, gt=0, description="max wait for an LLM attempt's `started` row to "
                                           "commit before its request")


class _Qdrant(BaseModel):
    """Qdrant"""

    qdrant_url: str | None = Field(None, validation_alias=AliasChoices("QDRANT_URL", "RAG_QDRANT_URL"),
                                   examples=["http://localhost:6333"],
                                   description="use a Qdrant server instead of the embedded store")
    qdrant_api_key: str | None = Field(None, validation_alias=AliasChoices("QDRANT_API_KEY"),
                                       description="API key for that server")
    store_backend: Literal["edge", "local"] = Field(
        "edge", description="embedded store: edge (Qdrant Edge, RAG_DATA_DIR/edge) | local (qdrant-client's slow "
        "pure-Python mode, RAG_DATA_DIR/qdrant: the pre-Edge store, for comparison)")
    hnsw_m: int = Field(16, ge=1, description="HNSW graph degree of the dense leg (Edge and server; local mode "
                        "searches exactly)")
    hnsw_ef_construct: int = Field(100, ge=4, description="HNSW build-time beam width (Qdrant refuses fewer than 4)")
    search_ef: int = Field(128, ge=1, description="HNSW query-time beam width")


class _Embeddings(BaseModel):
    """embeddings"""

    embed_model: str = Field("BAAI/bge-small-zh-v1.5", description="hub id or local folder; offline & missing -> "
                             "packaged all-MiniLM-L6-v2")
    embed_batch_size: int = Field(32, ge=1, description="texts per encode batch")
    embed_price_per_1k: float = Field(0.00002, ge=0, description="hosted-equivalent $ per 1k tokens, recorded as "
                                      "shadow cost (local bills $0)")
    embed_max_unk_rate: float = Field(0.2, ge=0, le=1, description="drop the dense leg when the model maps more "
                                      "than this share of wordpieces to [UNK]")


class _Chunking(BaseModel):
    """chunking"""

    chunker: str = Field("legal", description="chunker name; legal routes statutes and contracts to their own rules")
    chunk_target_min: int = Field(200, ge=1, description="merge toward this many cl100k tokens ...")
    chunk_target_max: int = Field(250, ge=1, description="... without going over this when merging whole units")
    chunk_hard_max: int = Field(512, ge=1, description="never exceeded (tables excepted: they stay whole)")
    chunk_min_tokens: int = Field(40, ge=0, description="fragments under this join a neighbour")
    contract_chunk_max: int = Field(120, ge=1, description="contracts: clauses and items packed up to this many "
                                    "tokens (rag_app/chunking/contract.py)")
    contract_chunk_hard_max: int = Field(240, ge=1, description="a longer clause is cut at sentence ends")
    semantic_backend: Literal["tfidf", "embedding"] = Field(
        "tfidf", description="tfidf (no model) or embedding: splits long unstructured spans")
    semantic_threshold: float = Field(0.45, ge=-1, le=1, description="split where adjacent sentences' (cosine) "
                                      "similarity falls below this")


class _Rerank(BaseModel):
    """rerank: prices and an HTTP endpoint"""

    rerank_price_per_1k: float = Field(0.00002, ge=0, description="hosted-equivalent $ per 1k tokens for rerank "
                                       "shadow cost")
    rerank_url: str | None = Field(
        None, examples=["https://api.jina.ai/v1/rerank"], description="HTTP rerank (POST {model, query, documents, "
        "top_n}: the Jina/Cohere/SiliconFlow/vLLM/TEI shape) instead of local bge; RAG_RERANK_MODEL names the "
        "remote model")
    rerank_api_key: str | None = Field(None, examples=["sk-..."], description="sent as Bearer token")
    rerank_timeout_s: float = Field(30.0, gt=0, description="seconds before the rerank endpoint counts as failed "
                                    "(retrieval order kept)")
    rerank_price_usd: str | None = Field(None, examples=["0.002"], description="what the provider bills per "
                                         "RAG_RERANK_PRICE_UNIT; unset -> rows are \"unpriced\", never $0")
    rerank_price_unit: Literal["search", "1k_tokens", "1m_tokens"] = Field(
        "search", description="search | 1k_tokens | 1m_tokens (Cohere bills per search, Jina per token)")


class _LLMEndpoint(BaseModel):
    """the LLM's endpoint"""

    openai_api_key: str | None = Field(None, validation_alias=AliasChoices("OPENAI_API_KEY"),
                                       description="key for the OpenAI-compatible endpoint")
    openai_base_url: str | None = Field(None, validation_alias=AliasChoices("OPENAI_BASE_URL"),
                                        description="endpoint URL; with neither set, answers are extractive (no LLM)")
    llm_provider: str | None = Field(None, description="genai-prices provider id when the model name is ambiguous")
    llm_mode: Literal["auto", "llm", "extractive"] = Field(
        "auto", description="auto (the LLM when an endpoint or key is set) | llm | extractive")
    llm_timeout_s: float = Field(30.0, gt=0, description="per-attempt request timeout")
    llm_stream: bool = Field(False, description="1: stream replies; usage comes from the final chunk "
                             "(stream_options.include_usage; needed for stream-only servers)")


class _Judge(BaseModel):
    """LLM judge

    Grades a share of live answers off the answer path (rag_app/quality/judge.py, docs/quality.md); off when
    RAG_JUDGE_MODEL is unset. Its calls are evaluation spend, booked apart from the queries they grade."""

    judge_model: str | None = Field(None, examples=["gpt-4o-mini"], description="OpenAI-compatible model that "
                                    "grades faithfulness and relevance; priced like generation, from the price table")
    judge_sample: float = Field(0.1, ge=0, le=1, description="share of live (rag serve) queries judged, 0..1, chosen "
                                "by a hash of the query id (replicas agree)")
    judge_base_url: str | None = Field(None, description="the judge's endpoint; unset = OPENAI_BASE_URL")
    judge_api_key: str | None = Field(None, description="the judge's key; unset = OPENAI_API_KEY")
    judge_prompt_version: str = Field("v1", description="prompts/judge/<version>.md")
    judge_max_tokens: int = Field(300, ge=16, description="the judge's reply: two grades and a reason")
    judge_timeout_s: float = Field(60.0, gt=0, description="seconds per judge request: it runs off the answer's "
                                   "path, so it may wait longer than an answer (RAG_LLM_TIMEOUT_S); retries as "
                                   "RAG_LLM_MAX_RETRIES")
    judge_queue: int = Field(64, ge=1, description="answers waiting for the judge; past it one is not judged "
                             "(counted in /healthz)")


class _Prices(BaseModel):
    """prices"""

    price_overrides: Path | None = Field(None, examples=["prices.json"], description="JSON file of per-million-token "
                                         "prices; beats the bundled table and genai-prices")
    report_currency: str = Field("USD", description="USD (the ledger's) or CNY: `rag report` converts at the price "
                                 "table's latest dated rate")


class _Otel(BaseModel):
    """OpenTelemetry export

    Every query's stages and LLM attempts (tracing/observe/otel_export.py); off when RAG_OTEL_ENDPOINT is unset.
    The standard OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are honoured."""

    otel_endpoint: str | None = Field(None, examples=["http://127.0.0.1:6006/v1/traces"], description="OTLP/HTTP "
                                      "traces URL (Phoenix, Jaeger, Tempo, a collector); unset = off")
    otel_timeout_s: float = Field(2.0, gt=0, description="per export request; exports run beside queries, never in "
                                  "their path: a dead collector never slows a query")
    otel_queue_spans: int = Field(2048, ge=16, description="spans waiting for export; beyond it spans are dropped "
                                  "and counted in /healthz")


class _Service(BaseModel):
    """HTTP service (rag serve)"""

    api_token: str | None = Field(None, description="when set, every endpoint but /healthz needs `Authorization: "
                                  "Bearer <token>`")
    experiments_file: Path | None = Field(None, examples=["experiments.json"], description="variants and experiments "
                                          "(rag_app/experiments/variants.py); RAG_EXPERIMENT picks the live one")
    ramp_check_s: float = Field(60.0, gt=0, description="`rag serve` looks at a ramped experiment this often "
                                "(advance, stay or roll back; rag_app/experiments/ramp.py)")
    alert_webhook: str | None = Field(None, description="http(s) URL POSTed each budget event and each ramp roll "
                                      "back (JSON; retried in the background, never on a query's path)")
    alert_format: Literal["json", "slack"] = Field(
        "json", description="json (the event itself) | slack (an incoming webhook's {\"text\": ...}; also "
        "Mattermost, Rocket.Chat, Discord's /slack endpoint)")
    alert_webhook_deadline_s: float = Field(10.0, gt=0, le=300, description="one alert's delivery (all its tries) "
                                            "ends by then: a receiver that trickles never holds later alerts")
    max_upload_mb: float = Field(20.0, gt=0, description="per-file size limit for POST /v1/ingest")
    max_request_mb: float = Field(100.0, gt=0, description="whole POST /v1/ingest body; refused (413) before it is "
                                  "read past this")
    allowed_hosts: str = Field("", examples=["rag.example.org"], description="extra Host names the service answers "
                               "besides localhost and the bound address, comma-separated (\"*\": any)")
    collection_idle_s: float = Field(600.0, gt=0, description="`rag serve` keeps a collection's app (open shard, "
                                     "caches) in memory while it is used: one idle this long is closed")
    max_open_collections: int = Field(16, ge=1, description="collections `rag serve` keeps open at once; the least "
                                      "recently used close first")


class _Spend(BaseModel):
    """spend control

    Limits per key, user or variant (rag_app/spend/budgets.py, docs/spend-control.md), checked at start-up."""

    budgets_file: Path | None = Field(
        None, examples=["budgets.json"], description="limits per key, user or variant: {\"budgets\": [{\"key\": "
        "\"*\", \"period\": \"day\", \"limit_usd\": 5.0, \"hard\": true, \"alert_at\": [0.5, 0.8, 1.0]}]}")
    budget_unpriced: Literal["block", "allow"] = Field(
        "block", description="block: a hard budget whose period holds unpriced calls (spend unknown) refuses further "
        "queries; allow: only the priced part counts (reported as partly unpriced)")
    budget_unpriced_assume_usd: str | None = Field(
        None, examples=["0.01"], description="with allow (required then, with a budgets file): each unpriced call "
        "counts at this many dollars against a hard limit: unpriced spend is bounded, never free")
    budget_ledger_down: Literal["closed", "open"] = Field(
        "closed", description="the ledger cannot be read to admit a query under a budget: closed refuses it (503), "
        "open admits it unchecked (logged)")
    answer_cache_size: int = Field(1000, ge=0, description="answers `rag serve` keeps per collection "
                                   "(rag_app/spend/answer_cache.py; exact match; dropped when a document changes); "
                                   "0 = off")


class _Parsing(BaseModel):
    """parsing

    Each file is parsed in a worker process that is killed past either limit."""

    parse_timeout_s: float = Field(120.0, gt=0, description="per-file budget for parse + chunk + BM25 tokenization, "
                                   "in its worker")
    parse_max_mb: float = Field(1024.0, ge=64, description="per-file memory budget of that worker (MB the file may "
                                "add; below 64 the parser libraries cannot even start); a DOCX may unpack to 1/4 of it")


class Settings(BaseSettings, _Places, _Ledger, _Qdrant, _Embeddings, _Chunking, QueryKnobs, _Rerank, _LLMEndpoint,
               _Judge, _Prices, _Otel, _Service, _Spend, _Parsing):
    """Every setting, one section per base (its docstring is the section's heading in .env.example and
    docs/settings.md, both written from here by `make settings-docs`); the query path's are `QueryKnobs`."""

    # an empty value (RAG_PRICE_OVERRIDES=, a blank line in .env) means unset, for every setting: the default
    # holds, never "" read as the path "." or as a number that fails to parse. Not frozen (QueryKnobs is): tests
    # and `rag serve`'s variants copy settings with changes.
    model_config = SettingsConfigDict(env_prefix="RAG_", env_file=".env", extra="ignore", env_ignore_empty=True,
                                      frozen=False)

    @field_validator(*_URL_EXAMPLES)
    @classmethod
    def _http_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A server's address is checked here, not at the first request: a typo would otherwise pass start-up
        and fail every query (a traceback in the CLI, a 502 from `rag serve`). Empty means unset."""
        if not value or not value.strip():
            return None
        if not is_http_url(value):
            raise ValueError(f"must be an http(s) URL such as {_URL_EXAMPLES[str(info.field_name)]}")
        return value

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """repr() and str() never show a key, a token or the ledger's password (tracebacks, logs and
        debuggers print settings)."""
        from rag_app.config.ledger_location import redact

        for name, value in super().__repr_args__():
            if name in SECRET_FIELDS and value:
                value = "***"
            elif name == "ledger_url" and value:
                value = redact(value)
            yield name, value

    @model_validator(mode="after")
    def _check(self) -> "Settings":
        self._check_sizes()
        self._check_endpoints()
        self._check_budget_policy()
        self._check_levers()
        self._check_adapter()
        self._check_models()
        from rag_app.config.ledger_location import LedgerURLError, parse_ledger_url
        try:
            parse_ledger_url(self.ledger_url, self.data_dir / "ledger.sqlite")
        except LedgerURLError as e:
            raise ConfigError(str(e)) from None
        return self

    def _check_sizes(self) -> None:
        if not self.chunk_target_min <= self.chunk_target_max <= self.chunk_hard_max:
            raise ConfigError(
                "RAG_CHUNK_TARGET_MIN <= RAG_CHUNK_TARGET_MAX <= RAG_CHUNK_HARD_MAX must hold; "
                f"got {self.chunk_target_min}, {self.chunk_target_max}, {self.chunk_hard_max}")
        if not 0 < self.contract_chunk_max <= self.contract_chunk_hard_max:
            raise ConfigError("0 < RAG_CONTRACT_CHUNK_MAX <= RAG_CONTRACT_CHUNK_HARD_MAX must hold; "
                              f"got {self.contract_chunk_max}, {self.contract_chunk_hard_max}")
        if self.top_n > self.top_k:
            raise ConfigError(f"RAG_TOP_N ({self.top_n}) must not exceed RAG_TOP_K ({self.top_k})")

    def _check_endpoints(self) -> None:
        if self.otel_endpoint:
            from rag_app.config.url_redaction import credentials_apart

            try:
                credentials_apart(normalise_endpoint(self.otel_endpoint))
            except ValueError as e:
                raise ConfigError(str(e)) from e
        if self.alert_webhook:
            from urllib.parse import urlsplit

            url = urlsplit(self.alert_webhook)
            if url.scheme not in ("http", "https") or not url.hostname:
                from rag_app.config.url_redaction import shown_url

                # the URL is a secret (a Slack hook's token is its path): never echoed whole
                raise ConfigError(f"RAG_ALERT_WEBHOOK must be an http(s) URL, got {shown_url(self.alert_webhook, path=False)}")
        if self.rerank_price_usd is not None:
            from decimal import Decimal, InvalidOperation

            try:
                ok = Decimal(self.rerank_price_usd).is_finite() and Decimal(self.rerank_price_usd) >= 0
            except (InvalidOperation, ValueError):
                ok = False
            if not ok:
                raise ConfigError(f"RAG_RERANK_PRICE_USD must be a non-negative dollar amount such as 0.002, "
                                  f"not {self.rerank_price_usd!r}")

    def _check_budget_policy(self) -> None:
        if self.budget_unpriced_assume_usd is not None or (self.budget_unpriced == "allow" and self.budgets_file):
            from rag_app.core import positive_usd

            if self.budget_unpriced_assume_usd is None:
                raise ConfigError("RAG_BUDGET_UNPRICED=allow needs RAG_BUDGET_UNPRICED_ASSUME_USD, the dollars each "
                                  "unpriced call counts at against a hard budget (e.g. 0.01); or set "
                                  "RAG_BUDGET_UNPRICED=block")
            if positive_usd(self.budget_unpriced_assume_usd) is None:
                raise ConfigError("RAG_BUDGET_UNPRICED_ASSUME_USD must be a positive dollar amount such as 0.01, "
                                  f"not {self.budget_unpriced_assume_usd!r}")

    def _check_levers(self) -> None:
        from rag_app.query.levers import levers_refusal

        why = levers_refusal(self.retrieval_levers)
        if why:
            raise ConfigError(f"RAG_RETRIEVAL_LEVERS={self.retrieval_levers!r}: {why}")

    def _check_adapter(self) -> None:
        why = self.adapter_refusal()
        if why:
            raise ConfigError(f"RAG_QUERY_ADAPTER: {why}")

    def adapter_refusal(self) -> str | None:
        """Why the query adapter cannot serve these levers and this rescore embedder (None: it can); a setting
        that names no adapter is a ConfigError naming it."""
        from rag_app.query import adapter_path, refusal

        levers = self.named_levers()
        path = adapter_path(self.query_adapter, self.data_dir, self.rescore_model, levers)
        return refusal(path, levers, self.rescore_model, "RAG_RESCORE_MODEL") if path else None

    def _check_models(self) -> None:
        if self.judge_model is not None and not self.judge_model.strip():
            self.judge_model = None  # RAG_JUDGE_MODEL= (empty): off, like unset
        if self.judge_model and not (self.judge_base_url or self.openai_base_url or self.judge_api_key
                                     or self.openai_api_key):
            raise ConfigError("RAG_JUDGE_MODEL needs an endpoint: set RAG_JUDGE_BASE_URL (or OPENAI_BASE_URL) "
                              "and/or RAG_JUDGE_API_KEY (or OPENAI_API_KEY)")
        if self.llm_mode == "llm" and not (self.openai_api_key or self.openai_base_url):
            raise ConfigError("RAG_LLM_MODE=llm needs OPENAI_BASE_URL and/or OPENAI_API_KEY")
        why = self.rewrite_refusal() if self.rewrites else None
        if why:
            raise ConfigError(f"the rewrite lever (RAG_QUERY_REWRITE=1 or `rewrite` in RAG_RETRIEVAL_LEVERS) {why}")

    def host_allow_list(self, bind_host: str | None = None) -> set[str]:
        """Hosts a request may name: the loopback names, the bound address, RAG_ALLOWED_HOSTS."""
        extra = {h.strip() for h in self.allowed_hosts.split(",") if h.strip()}
        bound = {bind_host} if bind_host and bind_host not in ("0.0.0.0", "::") else set()
        return {"127.0.0.1", "localhost", "::1", *bound, *extra}

    def rewrite_refusal(self) -> str | None:
        """Why the rewrite lever cannot run with these settings, as the end of a sentence (None: it can)."""
        if not self.use_llm:
            return ("needs the answer's LLM: set OPENAI_BASE_URL and/or OPENAI_API_KEY (and not "
                    "RAG_LLM_MODE=extractive), or turn it off")
        if "ranker" in self.named_levers():
            return "does not combine with the ranker lever (it orders the user's own words): turn one of them off"
        return None

    @property
    def use_llm(self) -> bool:
        if self.llm_mode == "auto":
            return bool(self.openai_api_key or self.openai_base_url)
        return self.llm_mode == "llm"

    @property
    def ledger(self) -> LedgerTarget:
        """Where the ledger lives (a LedgerTarget): RAG_LEDGER_URL, else the SQLite file below."""
        from rag_app.config.ledger_location import parse_ledger_url
        return parse_ledger_url(self.ledger_url, self.data_dir / "ledger.sqlite")

    @property
    def ledger_path(self) -> Path:
        """The SQLite ledger file (RAG_LEDGER_URL's, else DATA_DIR/ledger.sqlite); see `ledger` for PostgreSQL."""
        return self.ledger.path or self.data_dir / "ledger.sqlite"

    @property
    def qdrant_path(self) -> Path:
        return self.data_dir / "qdrant"

    @property
    def edge_path(self) -> Path:
        return self.data_dir / "edge"

    @property
    def cache_path(self) -> Path:
        return self.data_dir / "embed_cache.sqlite"


def check_data_dir(data_dir: Path) -> None:
    """RAG_DATA_DIR can be created and written, checked before a command's work (the store, the ledger and the
    caches all live there): a ConfigError of one line rather than a traceback from whichever writes first."""
    import tempfile

    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=data_dir, prefix=".write-check-"):
            pass
    except OSError as e:
        what = "a file, not a folder" if data_dir.is_file() else f"not writable ({e.strerror})"
        raise ConfigError(f"{data_dir}: RAG_DATA_DIR: {what}; fix its permissions or point "
                          "RAG_DATA_DIR at a writable folder") from None
    from rag_app.store import MIN_START_BYTES, free_bytes

    free = free_bytes(data_dir)
    if free < MIN_START_BYTES:  # the ledger's migration and the store's files would fail mid-write
        raise ConfigError(f"{data_dir}: RAG_DATA_DIR: the disk is full ({free:,} bytes free, at least "
                          f"{MIN_START_BYTES:,} needed to start); free space on it or point RAG_DATA_DIR elsewhere")


def is_http_url(url: str) -> bool:
    """http:// or https://, a host, and a port (if any) in range."""
    parts = urlsplit(url.strip())
    try:
        parts.port  # raises on a port that is not a number or out of range
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def normalise_endpoint(url: str) -> str:
    """The OTLP/HTTP traces URL (RAG_OTEL_ENDPOINT): used as given, `/v1/traces` appended when it has no path."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        from rag_app.config.url_redaction import shown_url

        raise ValueError("RAG_OTEL_ENDPOINT must be an http(s) URL such as http://127.0.0.1:6006/v1/traces, got "
                         + shown_url(url))
    return url.rstrip("/") + "/v1/traces" if parts.path in ("", "/") else url


# Names outside the RAG_ prefix that Settings reads (they are the ecosystem's own).
_PLAIN_NAMES = {"OPENAI_API_KEY", "OPENAI_BASE_URL", "QDRANT_URL", "QDRANT_API_KEY"}


def setting_names() -> set[str]:
    """Every environment variable Settings reads."""
    return {f"RAG_{name.upper()}" for name in Settings.model_fields} | _PLAIN_NAMES


def _env_file_names(env_file: Path) -> dict[str, str]:
    try:
        from dotenv import dotenv_values

        return {k: v or "" for k, v in dotenv_values(env_file).items()} if env_file.exists() else {}
    except Exception:  # an unreadable .env is pydantic-settings' to report
        return {}


def unknown_setting_warnings(environ: Mapping[str, str] | None = None, env_file: Path = Path(".env")) -> list[str]:
    """One line per RAG_* name no setting reads (a typo silently ignored otherwise), with the closest real name."""
    import difflib

    known = setting_names()
    given = {**_env_file_names(env_file), **(os.environ if environ is None else environ)}
    out = []
    for name in sorted(n for n in given if n.upper().startswith("RAG_") and n.upper() not in known):
        close = difflib.get_close_matches(name.upper(), sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else "; see .env.example for the settings"
        out.append(f"{name} is not a setting and is ignored{hint}")
    return out


def _one_line(e: ValidationError) -> str:
    """The first problem of a ValidationError as `<where>: RAG_NAME: what is wrong (got value)`."""
    err = e.errors()[0]
    loc = str(err["loc"][0]) if err.get("loc") else ""
    field = Settings.model_fields.get(loc) or _field_by_alias(loc)
    alias = field.validation_alias if field is not None else None
    names = [c for c in getattr(alias, "choices", []) if isinstance(c, str)]
    name = names[0] if names else f"RAG_{loc.upper()}" if loc else "settings"
    got = json.dumps(err.get("input"), ensure_ascii=False, default=str)[:60]
    source = ".env" if name not in os.environ and Path(".env").exists() else "environment"
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{source}: {name}: {msg} (got {got}); see .env.example for the expected form"


def _field_by_alias(name: str) -> FieldInfo | None:
    """The field whose first alias is `name`: pydantic locates a field validator's error by it (QDRANT_URL)."""
    for field in Settings.model_fields.values():
        if name in getattr(field.validation_alias, "choices", ()):
            return field
    return None


_warned = False


def load_settings(**overrides: Any) -> Settings:
    """The one settings loader every command uses: a bad value is a ConfigError of one line naming the
    variable (exit 2 at the front doors); a RAG_* name no setting reads is a warning naming the closest one."""
    global _warned
    if not _warned:  # once per process, however many commands load settings
        _warned = True
        for line in unknown_setting_warnings():
            log.warning(line)
    try:
        return Settings(**overrides)
    except ValidationError as e:
        raise ConfigError(_one_line(e)) from None
