"""Spend control: budgets that admit or refuse a query before it costs anything (`budgets`), what a
question or a grading may cost at most before it runs (`estimate`: what budgets and rate limits reserve),
the answer cache that answers a repeated question for nothing (`answer_cache`), and the alerts a crossed
threshold sends (`webhook`). A change to budget admission, the cache or alerts opens this folder only.

Import the module you need; this file only names them."""

__all__ = ["answer_cache", "budgets", "estimate", "webhook"]
