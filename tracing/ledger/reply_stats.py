"""What the ledger knows about a model's replies: the mean output tokens of its successful,
provider-reported calls, which the generate stage uses as the expected reply of an extractive answer
(rag_app.core.ports.ReplyStats). Cached for a minute; never fails a query."""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

log = logging.getLogger(__name__)
TTL_S = 60.0


class LedgerReplyStats:
    def __init__(self, target, ttl_s: float = TTL_S):
        self.target = target  # a LedgerTarget
        self.ttl_s = ttl_s
        self._cache: dict[str, tuple[float, float | None]] = {}
        self._lock = threading.Lock()
        self._ledger: Any = None  # opened on the first read

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
        from tracing.ledger.engine import Bounds
        from tracing.ledger.repository import Ledger

        try:
            if self._ledger is None:
                self._ledger = Ledger.open_read(self.target, bounds=Bounds(connect_s=5, statement_s=5, pool_size=1))
            return self._ledger.mean_output_tokens(model)
        except Exception as e:  # an estimate's input, never a reason to fail a query
            log.info("cannot read mean output tokens from the ledger (%s)", type(e).__name__)
            return None

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()
