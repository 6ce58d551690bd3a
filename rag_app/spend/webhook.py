"""RAG_ALERT_WEBHOOK: budget events and ramp roll backs are POSTed as JSON from one background thread,
a few tries with backoff each. Nothing here runs on a query's path: a slow or dead receiver never holds
a request, and a full queue drops (and logs) an event rather than grow.

Each delivery, all its tries, has a total deadline (RAG_ALERT_WEBHOOK_DEADLINE_S): httpx's timeouts
bound each read, so a receiver that trickles a byte every few seconds kept one delivery, and every
alert queued behind it, waiting for good. A delivery past its deadline is abandoned (failed, logged)
and the next alert goes; its thread ends when the receiver lets go, and at most MAX_ABANDONED of them
wait at once (past that, alerts fail at once, logged, until one ends)."""
from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

import httpx

log = logging.getLogger(__name__)
MAX_ABANDONED = 4  # deliveries past their deadline still holding a thread


class Webhook:
    """`send(event_id, event)` queues an event; `mark(event_id, "sent" | "failed")` records the outcome
    where the event has a row for it (budget events; a ramp's event is sent with id None). `render` turns
    an event into the body POSTed (the event itself; rag_app/spend/alerts.py has Slack's {"text": ...})."""

    def __init__(self, url: str, mark: Callable[[int, str], None] | None = None, tries: int = 4,
                 timeout_s: float = 5.0, backoff_s: float = 0.5, max_queue: int = 1000, deadline_s: float = 10.0,
                 render: Callable[[dict], dict] = lambda event: event):
        self.url, self.mark, self.tries, self.timeout_s, self.backoff_s = url, mark, tries, timeout_s, backoff_s
        self.render = render
        self.deadline_s = deadline_s
        self._abandoned: list[threading.Thread] = []
        self.abandoned = 0
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

    def _tries(self, event: dict, outcome: list[bool], give_up_at: float) -> None:
        body = self.render(event)  # here, in the delivery's thread: a renderer's bug fails one alert, not the sender
        for attempt in range(self.tries):
            left = give_up_at - time.monotonic()
            if left <= 0:
                return
            try:
                if httpx.post(self.url, json=body, timeout=min(self.timeout_s, left)).is_success:
                    outcome.append(True)
                    return
            except httpx.HTTPError:
                pass
            if attempt < self.tries - 1:
                time.sleep(min(self.backoff_s * 2 ** attempt, max(0.0, give_up_at - time.monotonic())))

    def _deliver(self, event_id: int | None, event: dict) -> None:
        outcome: list[bool] = []
        self._abandoned = [t for t in self._abandoned if t.is_alive()]
        if len(self._abandoned) >= MAX_ABANDONED:
            log.warning("alert webhook: %d deliveries still held by the receiver; %s not sent",
                        len(self._abandoned), event.get("event", event_id))
        else:
            worker = threading.Thread(target=self._tries, args=(event, outcome, time.monotonic() + self.deadline_s),
                                      name="alert-webhook-delivery", daemon=True)
            worker.start()
            worker.join(self.deadline_s + 0.5)  # the tries stop at the deadline unless a read is held past it
            if worker.is_alive():
                self._abandoned.append(worker)
                self.abandoned += 1
                log.warning("alert webhook: the receiver held %s past RAG_ALERT_WEBHOOK_DEADLINE_S=%gs; "
                            "abandoned, the next alert goes", event.get("event", event_id), self.deadline_s)
        ok = bool(outcome)
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
