"""Answer quality and users' feedback in the ledger, on SQLite and PostgreSQL alike."""
from __future__ import annotations

import json

from tracing.ledger import Ledger, LedgerWriter


def test_quality_rows_and_feedback_read_back_the_same_on_both_engines(ledger_url, tmp_path):
    w = LedgerWriter(ledger_url, spill_dir=tmp_path / "spill")
    w.put("queries", {"query_id": "q1", "kind": "query", "status": "ok", "started_at": "2026-12-01T00:00:00+00:00"})
    bad = [{"citation": "[7]", "why": "no passage 7 was sent (5 were)"}]
    for metric, value, detail in (("groundedness", 0.25, None), ("invalid_citations", 1, json.dumps(bad)),
                                  ("retrieval_confidence", 0.5, None)):
        w.put("query_quality", {"query_id": "q1", "metric": metric, "source": "local", "value": value,
                                "detail": detail, "recorded_at": "2026-12-01T00:00:01+00:00"})
    w.put("query_quality", {"query_id": "q1", "metric": "groundedness", "source": "local", "value": 0.5,
                            "recorded_at": "2026-12-01T00:00:02+00:00"})  # written again: replaces, never a second row
    assert w.flush(10)
    w.close()
    assert w.quarantined == 0
    with Ledger.open(ledger_url) as L:
        # scored before claims and refusals were kept: they read as unknown, never as "none"
        assert L.quality("q1") == {"groundedness": 0.5, "invalid_citations": bad, "retrieval_confidence": 0.5,
                                   "refusal": None, "claims": None}
        assert L.quality("nope") is None
        L.add_feedback("q1", "u1", -1, "wrong article", "2026-12-01T00:01:00+00:00")
        L.add_feedback("q1", "u1", 1, None, "2026-12-01T00:02:00+00:00")
        L.add_feedback("q1", "", 0, "不确定", "2026-12-01T00:03:00+00:00")
        assert [(f["user_id"], f["score"], f["comment"]) for f in L.feedback("q1")] == [("u1", 1, None), ("", 0, "不确定")]
        assert L.quality_summary() == {"scored_answers": 1, "mean_groundedness": 0.5, "invalid_citation_rate": 1.0,
                                       "refusals": 0, "refusal_rate": None,  # scored before refusals were kept
                                       "feedback": {"right": 1, "unsure": 1, "wrong": 0}, "judge_agreement": None}
        assert L.quality_summary("other-variant")["scored_answers"] == 0
        L.add_feedback("q1", "u2", -1, "引用的条文不对", "2026-12-01T00:04:00+00:00")
        assert L.review(-1) == [{"query_id": "q1", "question": None, "variant": None, "user_id": "u2", "score": -1,
                                 "comment": "引用的条文不对", "recorded_at": "2026-12-01T00:04:00+00:00",
                                 "groundedness": 0.5}]
        assert [r["user_id"] for r in L.review(1)] == ["u1"] and L.review(-1, limit=0) == []


CLAIMS = [{"text": "一人有限责任公司适用本节规定[1]。", "supported": True, "passage": 1, "why": "found in passage [1] (100% of its words)"},
          {"text": "股东可以随时抽逃出资[1]。", "supported": False, "passage": 1,
           "why": "modality differs: 可以 vs 不得 (passage [1])"}]
REFUSED = [{"text": "根据检索到的条文无法确定。", "supported": None, "passage": None,
            "why": "a refusal: says the passages do not answer, not a claim"}]


def test_claims_refusals_the_review_list_and_judge_agreement_read_the_same_on_both_engines(ledger_url, tmp_path):
    """Five answers: half grounded and marked wrong; a refusal; one citing a passage never sent; one the judge
    calls unfaithful and users right; one fine. The review list (inclusive thresholds) names each signal and
    the unsupported claims; the refusal is in its own list, never listed as ungrounded."""
    w = LedgerWriter(ledger_url, spill_dir=tmp_path / "spill")
    bad = [{"citation": "[7]", "why": "no passage 7 was sent (5 were)"}]
    local = {"q1": (0.5, 0, CLAIMS, 0.0), "q2": (None, 0, REFUSED, 1.0), "q3": (1.0, 1, [], 0.0),
             "q4": (1.0, 0, [], 0.0), "q5": (0.9, 0, [], 0.0)}
    for i, (qid, (grounded, invalid, claims, refusal)) in enumerate(local.items()):
        w.put("queries", {"query_id": qid, "kind": "query", "status": "ok", "question": f"question {qid}",
                          "started_at": f"2026-12-0{i + 1}T00:00:00+00:00"})
        unsupported = sum(c["supported"] is False for c in claims)
        for metric, value, detail in (("groundedness", grounded, None),
                                      ("invalid_citations", invalid, json.dumps(bad) if invalid else "[]"),
                                      ("claims", unsupported, json.dumps(claims, ensure_ascii=False)),
                                      ("refusal", refusal, None)):
            w.put("query_quality", {"query_id": qid, "metric": metric, "source": "local", "value": value,
                                    "detail": detail, "recorded_at": "2026-12-09T00:00:00+00:00"})
    for qid, faith in (("q1", 0.9), ("q4", 0.2), ("q5", 0.8)):
        w.put("query_quality", {"query_id": qid, "metric": "faithfulness", "source": "judge", "value": faith,
                                "recorded_at": "2026-12-09T00:00:00+00:00"})
    assert w.flush(10)
    w.close()
    with Ledger.open(ledger_url) as L:
        L.add_feedback("q1", "u1", -1, "条文说的是不得", "2026-12-09T01:00:00+00:00")
        L.add_feedback("q4", "u2", 1, None, "2026-12-09T01:00:00+00:00")
        L.add_feedback("q5", "u2", 1, None, "2026-12-09T01:00:00+00:00")
        assert L.quality("q1")["claims"] == CLAIMS and L.quality("q1")["refusal"] is False
        assert L.quality("q2")["refusal"] is True and L.quality("q2")["groundedness"] is None
        listed = L.to_review(0.5, 50)
        assert [(a["query_id"], a["why"]) for a in listed] == [
            ("q4", ["judge_unfaithful"]), ("q3", ["invalid_citation"]), ("q1", ["marked_wrong", "low_grounded"])]
        assert listed[2]["claims"] == [CLAIMS[1]] and listed[2]["comment"] == "条文说的是不得"
        assert listed[1]["invalid_citations"] == bad and listed[0]["judge_faithfulness"] == 0.2
        assert [a["query_id"] for a in L.to_review(0.49, 50, judge_below=0.19)] == ["q3", "q1"]  # q1: said wrong
        assert [(a["query_id"], a["why"]) for a in L.to_review(0.5, 50, refusals=True)] == [("q2", ["refusal"])]
        summary = L.quality_summary()
        assert (summary["refusals"], summary["refusal_rate"], summary["mean_groundedness"]) == (1, 0.2, 0.85)
        # judge right above 0.5: q1 right (users: wrong), q4 wrong (users: right), q5 right (users: right)
        # po = 1/3, pe = 2/3 * 2/3 + 1/3 * 1/3 = 5/9, kappa = (1/3 - 5/9) / (1 - 5/9) = -0.5
        assert summary["judge_agreement"] == {"answers": 3, "agreeing": 1, "share_agreeing": 0.3333, "kappa": -0.5}
        # the query list's filters read the same signals from each answer's totals (m022): unsupported is a claim
        # its claims row counts as not supported (q5's 0.9 names none), a refusal is no ungrounded answer
        ids = lambda **f: [r["query_id"] for r in L.list_queries(quality=f)[1]]  # noqa: E731
        assert (ids(unsupported=True), ids(refusal=True), ids(marked_wrong=True)) == (["q1"], ["q2"], ["q1"])
        assert ids(invalid_citations=True) == ["q3"] and ids(grounded_below=0.9) == ["q1"]  # strictly below
        assert L.list_queries(quality={"unsupported": True})[0] == 1
        listed = {r["query_id"]: r for r in L.list_queries()[1]}
        assert (listed["q2"]["refusal"], listed["q2"]["groundedness"], listed["q1"]["refusal"]) == (True, None, False)


def test_marked_answers_come_back_with_their_cited_passages_on_both_engines(ledger_url, tmp_path):
    """What `rag train-adapter --from-feedback` reads: each answer's net mark (more right than wrong: right; a
    tie or only unsure: no mark) with the passages it cited, in order; a replayed citation row replaces itself."""
    w = LedgerWriter(ledger_url, spill_dir=tmp_path / "spill")
    for n, qid in enumerate(("right", "wrong", "tie", "unsure", "uncited")):
        w.put("queries", {"query_id": qid, "kind": "query", "status": "ok", "question": f"问题{qid}",
                          "started_at": f"2026-12-01T00:00:0{n}+00:00"})
    for qid, cited in (("right", [("c1", "a.md", 0, 40), ("c2", "a.md", 40, 90)]), ("wrong", [("c9", "b.md", 5, 60)]),
                       ("tie", [("c3", "a.md", 0, 40)]), ("unsure", [("c4", "a.md", 0, 40)])):
        for pos, (chunk, doc, start, end) in enumerate(cited, 1):
            row = {"query_id": qid, "position": pos, "collection": "laws" if qid != "wrong" else "other",
                   "chunk_id": chunk, "doc": doc, "char_start": start, "char_end": end,
                   "recorded_at": "2026-12-01T00:00:09+00:00"}
            w.put("query_citations", row)
            if qid == "right" and pos == 1:
                w.put("query_citations", row)  # a spill replayed: the same row again
    assert w.flush(10)
    w.close()
    assert w.quarantined == 0
    with Ledger.open(ledger_url) as L:
        for qid, user, score in (("right", "u1", 1), ("right", "u2", 1), ("right", "u3", -1), ("wrong", "u1", -1),
                                 ("tie", "u1", 1), ("tie", "u2", -1), ("unsure", "u1", 0), ("uncited", "u1", 1)):
            L.add_feedback(qid, user, score, None, "2026-12-01T00:01:00+00:00")
        marked = L.marked_answers()
        assert [(m["query_id"], m["score"], m["marks"]) for m in marked] == [("right", 1, 3), ("wrong", -1, 1),
                                                                            ("uncited", 1, 1)]
        assert [(c["chunk_id"], c["doc"], c["char_start"], c["char_end"]) for c in marked[0]["citations"]] == [
            ("c1", "a.md", 0, 40), ("c2", "a.md", 40, 90)]
        assert marked[0]["question"] == "问题right" and marked[2]["citations"] == []
        assert [m["query_id"] for m in L.marked_answers("laws")] == ["right"]  # one collection's answers only
