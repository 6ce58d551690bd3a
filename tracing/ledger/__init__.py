"""The ledger: one schema (SQLAlchemy Core Tables), one repository, one writer, on SQLite or PostgreSQL.

    schema.py      the tables, once, for both engines
    engine.py      bounded engines per use; what an error means (retry, or fix a setting)
    migrations.py  m001..m023, each locked and transactional; back-fills run in batches afterwards
    views.py       query_costs and the re-priced views, one definition compiled per engine
    rollups.py     per-query totals, per-stage totals and report rollups, folded in as rows change
    shares.py      a query's share of each rollup key, in SQL (the fold's refresh, reports of the last N)
    budgets.py     spend per key, user or variant; admission under one lock for every replica
    bulk.py        loading many rows at once (benchmarks, fixtures); what the ledger weighs
    writer.py      LedgerWriter: bounded buffer, one writer thread, quarantine, spill and replay
    spill.py       spill files under RAG_DATA_DIR: private, versioned, typed, resumable
    reports.py     reports from the rollups; percentiles by index walks; streamed exports
    quality_groups.py  answer quality and feedback per report group and per day, beside the cost
    review.py      the review list (every signal that says an answer may be wrong), judge-user agreement
    series.py      an experiment's arms per hour or day: rollup sums and quality moments per bucket
    repository.py  Ledger: every read (and re-pricing, rebuilding) the front doors need
    rows.py        the row mappers: a priced StageUsage -> a stage_calls row, the one queries row
    reply_stats.py LedgerReplyStats: a model's mean reply length, for an extractive answer's shadow cost
    keys.py        issued API keys, their audit trail and rate windows
    loss_record.py how many rows a writer could keep nowhere, on a file preallocated at start

Nothing outside this package writes SQL.
"""
from tracing.ledger.engine import Bounds, is_transient, url_for_path
from tracing.ledger.migrations import MIGRATIONS, migrate, pending
from tracing.ledger.reports import BY_DIMS, Report, percentile, query_row, stage_json, usage_json
from tracing.ledger.reply_stats import LedgerReplyStats
from tracing.ledger.repository import SERVICE_BOUNDS, Ledger, LedgerUnavailable
from tracing.ledger.rows import queries_row, stage_row
from tracing.ledger.writer import LedgerWriter

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from tracing.ledger.budgets import BudgetTx, DIMS, EVALUATION


if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)

__all__ = ["BY_DIMS", "DIMS", "EVALUATION", "MIGRATIONS", "SERVICE_BOUNDS", "Bounds", "BudgetTx", "Ledger",
           "LedgerReplyStats", "LedgerUnavailable", "LedgerWriter", "Report", "is_transient", "migrate",
           "pending", "percentile", "queries_row", "query_row", "stage_json", "stage_row", "url_for_path",
           "usage_json"]
