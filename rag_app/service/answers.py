"""What the dashboard's query page shows beside the cost rows: the answer, its citations and the
passages sent to the model.

The ledger records what an answer cost, not what it said. Until it keeps answers too, the service
keeps the payloads of the last `limit` answers it gave in memory (`RecentAnswers`): a restart, or a
query asked with `rag ask` in another process, has no text to show, and the page says so.
`AnswerArchive` is the seam a ledger-backed store implements later (the table it needs is proposed
in issue 22's report), with no change to the routes or the page.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol

# The answer payload's fields the page reads; costs come from the ledger, never from here.
ANSWER_FIELDS = ("query_id", "question", "answer", "mode", "citations", "passages", "levers")


class AnswerArchive(Protocol):
    limit: int  # how many answers it keeps (a 404 says so)

    def put(self, payload: dict) -> None: ...

    def get(self, query_id: str) -> dict | None: ...


class RecentAnswers:
    """The newest `limit` answers, oldest dropped first. One answer with 1,000 tokens of passages is
    about 10 KB, so the default 200 holds about 2 MB."""

    def __init__(self, limit: int = 200) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        self.limit = limit
        self._items: OrderedDict[str, dict] = OrderedDict()
        self._lock = threading.Lock()  # asks run on the server's worker threads

    def put(self, payload: dict) -> None:
        kept = {k: payload[k] for k in ANSWER_FIELDS if k in payload}
        with self._lock:
            self._items[payload["query_id"]] = kept
            self._items.move_to_end(payload["query_id"])
            while len(self._items) > self.limit:
                self._items.popitem(last=False)

    def get(self, query_id: str) -> dict | None:
        with self._lock:
            return self._items.get(query_id)
