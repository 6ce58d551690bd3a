"""RAG_ALERT_WEBHOOK: budget events and ramp roll backs are POSTed as JSON from one background thread,
a few tries with backoff each. Nothing here runs on a query's path: a slow or dead receiver never holds
a request, and a full queue drops (and logs) an event rather than grow."""
from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

import httpx

log = logging.getLogger(__name__)


class Webhook:
    """`send(event_id, event)` queues an event; `mark(event_id, "sent" | "failed")` records the outcome
    where the event has a row for it (budget events; a ramp's event is sent with id None)."""

    def __init__(self, url: str, mark: Callable[[int, str], None] | None = None, tries: int = 4,
                 timeout_s: float = 5.0, backoff_s: float = 0.5, max_queue: int = 1000):
        self.url, self.mark, self.tries, self.timeout_s, self.backoff_s = url, mark, tries, timeout_s, backoff_s
        self._q: queue.Queue[tuple[int | None, dict] | None] = queue.Queue(max_queue)
        self.sent = self.failed = self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="alert-webhook", daemon=True)
        self._thread.start()

    def send(self, event_id: int | None, event: dict) -> None:
        try:
            self._q.put_nowait((event_id, event))
        except queue.Full:
            self.dropped += 1
            log.warning("alert webhook queue full: %s not sent", event.get("event", event_id))

    def wait(self) -> None:
        """Until every queued event has been tried (tests, shutdown)."""
        self._q.join()

    def close(self, timeout_s: float = 5.0) -> None:
        self._q.put(None)
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while (item := self._q.get()) is not None:
            try:
                self._deliver(*item)
            finally:
                self._q.task_done()
        self._q.task_done()

    def _deliver(self, event_id: int | None, event: dict) -> None:
        ok = False
        for attempt in range(self.tries):
            try:
                ok = httpx.post(self.url, json=event, timeout=self.timeout_s).is_success
            except httpx.HTTPError:
                ok = False
            if ok or attempt == self.tries - 1:
                break
            time.sleep(self.backoff_s * 2 ** attempt)
        self.sent += ok
        self.failed += not ok
        if not ok:
            log.warning("alert webhook: %s not delivered after %d tries", event.get("event", event_id), self.tries)
        if self.mark is None or event_id is None:
            return
        try:
            self.mark(event_id, "sent" if ok else "failed")
        except Exception as e:  # the ledger down: the row stays `pending`, the event was (or was not) sent
            log.warning("event %s: webhook %s, not recorded (%s)", event_id, "sent" if ok else "failed", e)
