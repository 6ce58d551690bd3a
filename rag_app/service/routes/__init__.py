"""One router per resource: `ask` (/v1/ask, /v1/chat/completions, /v1/models), `queries` (the
ledger's queries, their feedback and the review list), `reports`, `budgets`, `experiments`,
`ingest`, `keys` (issued API keys), and `pages` (the dashboard and /healthz). Each takes what it needs from `deps`."""
from rag_app.service.routes import ask, budgets, experiments, ingest, keys, pages, queries, reports

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from rag_app.service.routes.ask import AskRequest, api_key_id

__all__ = ["AskRequest", "api_key_id"]

if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)

ROUTERS = tuple(m.router for m in (ask, queries, reports, budgets, experiments, ingest, keys, pages))
