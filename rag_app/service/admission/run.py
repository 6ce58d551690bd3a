"""Step `run`: the question answered on its route (rag_app/service/pool.py VariantPool.run, or the shell's
one app). First tells the front door the query may spend (`admitted`: a stream starts its response then;
`rag ask` loads its models then, so a refused ask loads none), then marks it `began` (a failure from here
on keeps every reservation: the model may have been paid), runs it and adds `answer`, `payload` (the
presenter's) and `result`. A cache hit skips it."""
from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rag_app.present import answer_payload
from rag_app.service.admission.context import Admission, QueryResult
from tracing.ledger import usage_json


class Run:
    name: ClassVar[str] = "run"

    def __init__(self, doc_path: Callable[[str], str] = str):
        self.doc_path = doc_path  # how a citation's file is shown (the service: relative to its data dir)

    def enter(self, ctx: Admission) -> None:
        if ctx.result is not None:
            return
        if ctx.admitted is not None:
            ctx.admitted(ctx.route.query_id, ctx.route.variant)
        ctx.began = True
        ctx.answer = ctx.router.run(ctx.route, ctx.request.question, ctx.request.scope, ctx.callbacks)
        ctx.payload = answer_payload(ctx.answer, stage_view=usage_json, doc_path=self.doc_path)
        ctx.result = QueryResult({**ctx.payload, "cache_hit": False, "saved_cost_usd": None}, ctx.route,
                                 cache_hit=False)

    def undo(self, ctx: Admission) -> None:
        pass
