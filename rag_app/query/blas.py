"""One BLAS thread for the small products on a question's path (the whole-collection cosine of `wide`, the
query adapter's map). OpenBLAS splits a matrix-vector product across every core once it passes a few
thousand multiplies; on two busy cores the hand-off costs far more than the work: the 5,848 x 384 cosine
took 6-10 ms threaded at load 5-9 against 0.3 ms on one thread (0.6 ms with the limit set and reset here).
The limit is OpenBLAS's process-wide setting, held only for the product; training and evaluation keep
every thread."""
from __future__ import annotations

import threading
from contextlib import AbstractContextManager, nullcontext
from typing import Any

_lock = threading.Lock()
_blas: list[Any] = []  # [controller or None], found once


def one_thread() -> AbstractContextManager[Any]:
    """A context in which numpy's BLAS runs on one thread (a no-op when threadpoolctl or a BLAS it knows is
    missing)."""
    with _lock:
        if not _blas:
            try:
                import numpy  # noqa: F401  (its BLAS must be loaded to be found)
                from threadpoolctl import ThreadpoolController

                found = ThreadpoolController().select(user_api="blas")
                _blas.append(found if found.lib_controllers else None)
            except Exception:  # a missing or unknown BLAS: products just run as numpy runs them
                _blas.append(None)
    return _blas[0].limit(limits=1) if _blas[0] is not None else nullcontext()
