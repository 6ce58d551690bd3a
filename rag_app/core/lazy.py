"""`Lazy[T]`: a part built by its loader on the first `get()`, once, whichever thread asks first (the
others wait for it), then handed out without a lock. It is the query path's `Provider`
(rag_app/core/ports.py): the composition root builds one per part, with the part's own loader, and the
pipeline holds it, so a question asks the part and never the composition root.

    Lazy(partial(load_reranker, model, settings))   loads on first use
    Lazy.of(chat_model)                             already built (a test's fake, a model handed in)
    lazy.reset()                                    built again at the next get (a collection re-ingested)

A loader that raises leaves nothing behind: the next `get()` tries again."""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Lazy(Generic[T]):
    def __init__(self, load: Callable[[], T]):
        self._load = load
        self._lock = threading.Lock()
        self._box: tuple[T] | None = None  # one read: a reset between two reads cannot hand out half of it

    @classmethod
    def of(cls, value: T) -> Lazy[T]:
        made: Lazy[T] = cls(lambda: value)
        made._box = (value,)
        return made

    def get(self) -> T:
        box = self._box
        if box is None:
            with self._lock:
                box = self._box
                if box is None:
                    box = self._box = (self._load(),)
        return box[0]

    @property
    def loaded(self) -> bool:
        return self._box is not None

    def reset(self) -> None:
        self._box = None
