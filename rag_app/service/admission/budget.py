"""Step `budget`: every budget that binds the question (RAG_BUDGETS_FILE's on its key, user and variant,
and an issued key's own), admitted in one ledger transaction at the question's estimate
(rag_app/spend/budgets.py BudgetGate): OverBudget, the 429 (`rag ask`: one line, exit 3), when a hard one
is spent; LedgerDown when the ledger cannot be read under RAG_BUDGET_LEDGER_DOWN=closed. Reads the route,
the request and the estimate; a cache hit (`result` set) spends nothing and skips it. What it reserves
stands until the query's row lands (or RESERVATION_TTL): there is nothing to undo."""
from __future__ import annotations

from decimal import Decimal
from typing import ClassVar

from rag_app.access import Principal
from rag_app.service.admission.context import Admission
from rag_app.spend import NANO, Budget, BudgetGate


def key_budget(p: Principal) -> tuple[Budget, ...]:
    """An issued key's own budget, as a hard budget on its name."""
    if p.name is None or p.budget_nano_usd is None:
        return ()
    return (Budget("key", p.name, p.budget_period or "month", Decimal(p.budget_nano_usd) / NANO, "USD", True, ()),)


class AdmitBudget:
    name: ClassVar[str] = "budget"

    def __init__(self, gate: BudgetGate):
        self.gate = gate

    def enter(self, ctx: Admission) -> None:
        if ctx.result is not None:
            return
        req, route = ctx.request, ctx.route
        self.gate.admit(route.query_id, {"key": req.key_id, "user": req.user_id, "variant": route.variant},
                        req.question, key_budget(req.principal), estimate=ctx.estimate)

    def undo(self, ctx: Admission) -> None:
        pass
