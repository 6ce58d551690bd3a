"""Alert webhook (RAG_ALERT_WEBHOOK): each event is POSTed as JSON from a background thread, retried with
backoff, and dropped with a warning after the last try. Nothing here ever runs on a query's path, and a
dead receiver never slows or fails a request."""
from __future__ import annotations

import logging
import threading
import time

import httpx

log = logging.getLogger(__name__)
RETRY_DELAYS_S = (0.5, 2.0, 8.0)  # after the 1st, 2nd and 3rd failure; 4 tries in all
TIMEOUT_S = 5.0


def deliver(url: str, event: dict, *, delays: tuple[float, ...] | None = None) -> bool:
    """POST `event` until a 2xx answer or the tries run out. True when delivered."""
    delays = RETRY_DELAYS_S if delays is None else delays
    for attempt, delay in enumerate((*delays, None), start=1):
        try:
            r = httpx.post(url, json=event, timeout=TIMEOUT_S)
            if r.is_success:
                return True
            why = f"HTTP {r.status_code}"
        except httpx.HTTPError as e:
            why = type(e).__name__
        if delay is None:
            log.warning("alert webhook: %s not delivered after %d tries (%s)", event.get("event"), attempt, why)
            return False
        time.sleep(delay)
    return False


def post_event(url: str | None, event: dict) -> threading.Thread | None:
    """Deliver in the background; the thread is returned for tests and shutdown to join."""
    if not url:
        return None
    t = threading.Thread(target=deliver, args=(url, event), name="alert-webhook", daemon=True)
    t.start()
    return t
