"""Answers as Server-Sent Events: the query runs in a worker thread and its reply's tokens come out as
the LLM sends them (a streaming callback handler makes LangChain call the streaming API).

The request thread first waits for the query to be admitted (budgets) or to fail: a refusal is still a
plain HTTP status (429), never a 200 stream carrying an error. After that the stream is committed:
a failure is an error event, then the end of the stream. A client that goes away does not stop the
query: it is answered and booked like any other.

An LLM retry after tokens were sent cannot take them back: the retry's tokens are not streamed, and the
final events carry the answer as it was booked.
"""
from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

DONE, ERROR, TOKEN, ADMITTED = "done", "error", "token", "admitted"


class TokenSink(BaseCallbackHandler):
    """Hands the reply's tokens to a queue. `tap_output_iter`/`tap_output_aiter` make it a LangChain
    streaming handler: with it attached, a chat model streams even when RAG_LLM_STREAM is off."""

    def __init__(self, events: queue.Queue):
        self.events = events
        self.attempts = 0
        self.sent = False
        self.muted = False  # a retry after tokens went out: its tokens would garble the stream

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID, **kw: Any) -> None:
        self.attempts += 1
        self.muted = self.muted or (self.attempts > 1 and self.sent)

    def on_llm_new_token(self, token: str | list[str | dict[str, Any]], *, chunk: Any = None, run_id: UUID,
                         parent_run_id: UUID | None = None, tags: list[str] | None = None, **kw: Any) -> None:
        if token and not self.muted:
            self.sent = True
            self.events.put((TOKEN, token))

    def tap_output_iter(self, run_id: UUID, output: Iterator[Any]) -> Iterator[Any]:
        return output

    def tap_output_aiter(self, run_id: UUID, output: Any) -> Any:
        return output


class StreamedQuery:
    """`run(callbacks, admitted)` in a worker thread; `admitted(query_id, variant)` is called by the
    budget gate's wrapper once the query may spend."""

    def __init__(self, run: Callable[[list, Callable[[str, str | None], None]], Any]):
        self.events: queue.Queue = queue.Queue()
        self.sink = TokenSink(self.events)
        self.query_id: str | None = None
        self.variant: str | None = None

        def work() -> None:
            try:
                self.events.put((DONE, run([self.sink], self._admitted)))
            except BaseException as e:  # handed to the request thread, which answers it
                self.events.put((ERROR, e))

        threading.Thread(target=work, name="sse-query", daemon=True).start()

    def _admitted(self, query_id: str, variant: str | None) -> None:
        self.query_id, self.variant = query_id, variant
        self.events.put((ADMITTED, None))

    def wait_admitted(self) -> None:
        """Block until the query is admitted; a refusal or an early failure raises here (its HTTP status)."""
        kind, value = self.events.get()
        if kind == ERROR:
            raise value
        if kind == DONE:  # finished without passing the gate (no gate wired): replay it to the stream
            self.events.put((kind, value))

    def follow(self) -> Iterator[tuple[str, Any]]:
        """(TOKEN, text)... then (DONE, result) or (ERROR, exception)."""
        while True:
            kind, value = self.events.get()
            if kind == ADMITTED:
                continue
            yield kind, value
            if kind in (DONE, ERROR):
                return


def sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n"


def rest_of(answer_text: str, streamed: str) -> str:
    """What the stream still owes once the answer is booked: the rest of it when the tokens sent are its
    beginning (an extractive answer streams nothing, so all of it), else nothing (a retry after tokens
    went out; the final event carries the whole answer)."""
    return answer_text[len(streamed):] if answer_text.startswith(streamed) else ""


SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
