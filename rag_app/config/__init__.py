"""Settings, checked once at start-up: environment variables beat `.env` beat defaults (`settings`),
where the ledger lives (`ledger_location`: `RAG_LEDGER_URL` parsed), and how a URL that may carry a
password is shown to people (`url_redaction`). Imports `core`, `store.space` for the
free-space check and `query.levers` for the levers' names.

Import the module you need; this file only names them."""

__all__ = ["ledger_location", "settings", "url_redaction"]
