"""Step `models`: a key with a model list may use a route whose model or variant it names (Forbidden,
the 403, otherwise). Reads the request's principal and chat `model`, the route's variant and the app's
LLM; adds nothing, takes nothing."""
from __future__ import annotations

from typing import ClassVar

from rag_app.access import check_models
from rag_app.service.admission.context import Admission


class CheckModels:
    name: ClassVar[str] = "models"

    def enter(self, ctx: Admission) -> None:
        check_models(ctx.request.principal, (ctx.request.model, ctx.route.variant, ctx.app.settings.llm_model))

    def undo(self, ctx: Admission) -> None:
        pass
