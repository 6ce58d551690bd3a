"""Settings, checked once at start-up: environment variables beat `.env` beat defaults (`settings`),
where the ledger lives (`ledger_location`: `RAG_LEDGER_URL` parsed), and how a URL that may carry a
password is shown to people (`url_redaction`); `envfile` writes `.env.example` and docs/settings.md
from the settings' declarations. Imports `core`, `store.space` for the
free-space check and `query.levers` for the levers' names.

Other packages import from this face (the names under `TYPE_CHECKING`, looked up on first use
by rag_app/core/face.py); inside the package, modules import each other directly."""

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from rag_app.config.ledger_location import LedgerTarget, LedgerURLError, as_target, redact
    from rag_app.config.settings import Settings, check_data_dir, load_settings, normalise_endpoint
    from rag_app.config.url_redaction import credentials_apart, scrub_urls, shown_url


if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)

__all__ = ["LedgerTarget", "LedgerURLError", "Settings", "as_target", "check_data_dir", "credentials_apart",
           "load_settings", "normalise_endpoint", "redact", "scrub_urls", "shown_url"]
