"""One router per resource: `ask` (/v1/ask, /v1/chat/completions, /v1/models), `queries` (the
ledger's queries, their feedback and the review list), `reports`, `budgets`, `experiments`,
`ingest`, `keys` (issued API keys), and `pages` (the dashboard and /healthz). Each takes what it needs from `deps`."""
from rag_app.service.routes import ask, budgets, experiments, ingest, keys, pages, queries, reports

ROUTERS = tuple(m.router for m in (ask, queries, reports, budgets, experiments, ingest, keys, pages))
