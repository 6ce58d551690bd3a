"""The dashboard's memory of recent answers: bounded, newest kept, only the fields the page reads."""
from __future__ import annotations

import pytest

from rag_app.service.answers import ANSWER_FIELDS, RecentAnswers


def payload(qid: str) -> dict:
    return {"query_id": qid, "question": "q", "answer": f"answer {qid}", "mode": "llm", "citations": [],
            "passages": [{"n": 1, "text": "passage"}], "levers": [], "stages": [{"cost_usd": 1}],
            "total_cost_usd": 1.0}


def test_the_oldest_answers_are_dropped_first_and_a_repeat_counts_as_new():
    kept = RecentAnswers(limit=2)
    for qid in ("a", "b"):
        kept.put(payload(qid))
    kept.put(payload("a"))  # asked again with the same id: now the newest
    kept.put(payload("c"))
    assert kept.get("b") is None and kept.get("a")["answer"] == "answer a" and kept.get("c") is not None


def test_costs_are_not_kept_here_the_ledger_has_them():
    kept = RecentAnswers(limit=5)
    kept.put(payload("a"))
    assert set(kept.get("a")) == set(ANSWER_FIELDS)


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        RecentAnswers(limit=0)
