"""Cost tracing: a LangChain callback (cost_tracer) prices each stage's usage (pricing, usage)
and hands rows to a background writer (ledger) over a migrated SQLite schema (migrations);
reports read the ledger back (reports)."""
