"""What the ledger knows about a model's replies: the mean output tokens of its successful,
provider-reported calls, which the generate stage uses as the expected reply of an extractive answer
(rag_app.ports.ReplyStats). Read on its own connection, cached for a minute; never fails a query."""
from __future__ import annotations

import logging
import sqlite3
import threading
import time

from tracing.db import connect_pg

log = logging.getLogger(__name__)
TTL_S = 60.0


class LedgerReplyStats:
    def __init__(self, target, ttl_s: float = TTL_S):
        self.target = target  # a LedgerTarget
        self.ttl_s = ttl_s
        self._cache: dict[str, tuple[float, float | None]] = {}
        self._lock = threading.Lock()

    def mean_output_tokens(self, model: str) -> float | None:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(model)
        if hit and now - hit[0] < self.ttl_s:
            return hit[1]
        mean = self._read(model)
        with self._lock:
            self._cache[model] = (now, mean)
        return mean

    def _read(self, model: str) -> float | None:
        try:
            if self.target.dialect == "postgresql":
                conn = connect_pg(self.target.url, timeout_s=5, statement_timeout_s=5)
            else:
                conn = sqlite3.connect(f"file:{self.target.path}?mode=ro", uri=True, timeout=5)
            try:
                row = conn.execute("SELECT AVG(output_tokens) FROM stage_calls WHERE model = ? AND stage = 'generate' "
                                   "AND status = 'ok' AND usage_source = 'provider' AND output_tokens > 0",
                                   (model,)).fetchone()
                return None if row is None or row[0] is None else float(row[0])
            finally:
                conn.close()
        except Exception as e:  # an estimate's input, never a reason to fail a query
            if not isinstance(e, sqlite3.Error):
                log.warning("cannot read mean output tokens from the ledger (%s)", e)
            return None
