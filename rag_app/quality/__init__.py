"""Whether an answer was right, beside what it cost: signals computed from nothing but the answer and
the passages sent (`signals`: groundedness, invalid citations, retrieval confidence). The tracer
records them, the experiments' verdict reads them, the front doors show them.

Import the module you need; this file only names them."""

__all__ = ["signals"]
