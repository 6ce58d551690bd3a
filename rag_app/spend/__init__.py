"""Spend control: budgets that admit or refuse a query before it costs anything (`budgets`), the
answer cache that answers a repeated question for nothing (`answer_cache`), and the alerts a crossed
threshold sends (`webhook`). A change to budget admission, the cache or alerts opens this folder only.

Import the module you need; this file only names them."""

__all__ = ["answer_cache", "budgets", "webhook"]
