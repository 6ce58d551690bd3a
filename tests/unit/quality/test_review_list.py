"""The review list (`GET /v1/review`, the dashboard's "to review" panel): answers users marked wrong or
grounded below a threshold, newest first, each saying why, from a real SQLite ledger."""
from __future__ import annotations

from tests.fakes.sql_ledger import SqlLedger


def seed(ledger_path):
    L = SqlLedger(ledger_path)
    for i, grounded in enumerate((1.0, 0.2, 0.9, None, 0.49)):
        L.execute("INSERT INTO queries (query_id, kind, question, status, started_at) VALUES (?, 'query', ?, 'ok', ?)",
                  (f"q{i}", f"question {i}", f"2026-12-0{i + 1}T10:00:00.000+00:00"))
        if grounded is not None:
            L.execute("INSERT INTO query_quality (query_id, metric, source, value, recorded_at) "
                      "VALUES (?, 'groundedness', 'local', ?, 't')", (f"q{i}", grounded))
    L.commit()
    L.add_feedback("q2", "u1", -1, "引用的条文不对", "2026-12-06T00:00:00.000+00:00")
    L.add_feedback("q0", "u1", 1, None, "2026-12-06T00:00:00.000+00:00")
    try:
        return L.to_review(0.5, 50), L.to_review(0.3, 5)
    finally:
        L.close()


def test_marked_wrong_or_low_grounded_newest_first_each_saying_why(tmp_path):
    review, narrow = seed(tmp_path / "ledger.sqlite")
    assert [(a["query_id"], a["why"]) for a in review] == [
        ("q4", ["low_grounded"]), ("q2", ["marked_wrong"]), ("q1", ["low_grounded"])]
    assert review[1]["comment"] == "引用的条文不对" and review[1]["groundedness"] == 0.9
    assert [a["query_id"] for a in narrow] == ["q2", "q1"]  # 0.49 is not below 0.3


def test_the_threshold_is_inclusive_and_a_refusal_is_never_ungrounded(tmp_path):
    """A true claim and an invented one score exactly 0.5: listed (0.9's strict threshold hid them). A
    refusal has no groundedness and appears only in the refusals' own list."""
    L = SqlLedger(tmp_path / "ledger.sqlite")
    for qid, metric, value in (("half", "groundedness", 0.5), ("half", "refusal", 0.0), ("refused", "refusal", 1.0),
                               ("fine", "groundedness", 0.51), ("fine", "refusal", 0.0)):
        L.execute("INSERT OR IGNORE INTO queries (query_id, kind, status, started_at) VALUES (?, 'query', 'ok', ?)",
                  (qid, f"2026-12-01T{len(qid):02d}:00:00.000+00:00"))
        L.execute("INSERT INTO query_quality (query_id, metric, source, value, recorded_at) VALUES (?, ?, 'local', ?, 't')",
                  (qid, metric, value))
    L.commit()
    try:
        assert [(a["query_id"], a["why"]) for a in L.to_review(0.5, 50)] == [("half", ["low_grounded"])]
        assert [(a["query_id"], a["why"]) for a in L.to_review(0.5, 50, refusals=True)] == [("refused", ["refusal"])]
    finally:
        L.close()
