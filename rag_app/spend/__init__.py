"""Spend control: budgets that admit or refuse a query before it costs anything (`budgets`), what a
question or a grading may cost at most before it runs (`estimate`: what budgets and rate limits reserve),
the answer cache that answers a repeated question for nothing (`answer_cache`), and the alerts a crossed
threshold sends (`webhook`). A change to budget admission, the cache or alerts opens this folder only.

Other packages import from this face (the names under `TYPE_CHECKING`, looked up on first use
by rag_app/core/face.py); inside the package, modules import each other directly."""

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from rag_app.spend.alerts import alert_webhook, renderer, send_digests
    from rag_app.spend.answer_cache import AnswerCache, Cached, Saving, hit_payload, live_usage
    from rag_app.spend.budgets import (Budget, BudgetGate, LedgerDown, Limits, NANO, OverBudget,
                                       budget_status, evaluation_admission, event_json, load_budgets,
                                       render_status)
    from rag_app.spend.estimate import QuestionEstimate, question_estimate
    from rag_app.spend.webhook import Webhook


if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)

__all__ = ["NANO", "AnswerCache", "Budget", "BudgetGate", "Cached", "LedgerDown", "Limits", "OverBudget",
           "QuestionEstimate", "Saving", "Webhook", "alert_webhook", "budget_status", "evaluation_admission",
           "event_json", "hit_payload", "live_usage", "load_budgets", "question_estimate", "render_status",
           "renderer", "send_digests"]
