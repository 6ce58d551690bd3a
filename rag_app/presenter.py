"""One answer payload for every front door: `rag ask --json`, `rag ask`'s tables, `rag demo` and
`POST /v1/ask` show the same fields and the same totals, computed from the usages the answer carries
(the values the ledger rows were written from), never from reading the ledger back."""
from __future__ import annotations

from collections.abc import Callable

from rag_app.money import usd_json
from rag_app.types import Answer
from rag_app.usage import totals
from tracing.reports import stage_json
from tracing.rows import stage_row


def stage_dicts(answer: Answer) -> list[dict]:
    """The answer's stage rows as `GET /v1/queries/{id}` and `rag report` show ledger rows."""
    return [stage_json(stage_row(u, query_id=answer.query_id)) for u in answer.usage]


def answer_payload(answer: Answer, *, doc_path: Callable[[str], str] = str) -> dict:
    """`doc_path`: how a citation's source file is shown (the service shows it relative to its data dir)."""
    t = totals(answer.usage)
    return {"query_id": answer.query_id, "question": answer.question, "answer": answer.text, "mode": answer.mode,
            "citations": [{**c.as_dict(), "doc": doc_path(c.doc)} for c in answer.citations],
            "levers": list(answer.levers),
            "scope": ({"docs": list(answer.scope.labels), "how": answer.scope.how} if answer.scope else None),
            "stages": stage_dicts(answer),
            "total_cost_usd": usd_json(t.cost_nano), "total_shadow_cost_usd": usd_json(t.shadow_nano),
            "unpriced": t.unpriced, "unpriced_rows": t.unpriced_rows}
