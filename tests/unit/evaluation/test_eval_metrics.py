"""The hit rule and the ranx wiring on cases small enough to work out by hand."""
from __future__ import annotations

import pytest

from rag_app.evaluation.harness import score
from rag_app.evaluation.hits import Ranked, covers, ranking_to_run
from rag_app.evaluation.qa import Gold, Question

G = Gold("law.md", 100, 200)  # a 100-char gold span


@pytest.mark.parametrize("doc,start,end,hit", [
    ("law.md", 100, 200, True),     # exact
    ("law.md", 0, 1000, True),      # chunk contains the gold
    ("law.md", 150, 400, True),     # covers exactly 50%
    ("law.md", 151, 400, False),    # 49%
    ("law.md", 120, 160, False),    # inside but only 40%
    ("law.md", 200, 300, False),    # touches the end, no overlap
    ("other.md", 100, 200, False),  # same offsets, wrong document
])
def test_hit_rule(doc, start, end, hit):
    assert covers(doc, start, end, G) is hit


def R(doc, s, e):
    return Ranked(doc, s, e, 10, 0.0)


def test_metrics_by_hand():
    q1 = Question("q1", "?", "a", (Gold("a.md", 0, 10),))
    q2 = Question("q2", "?", "b", (Gold("b.md", 0, 10), Gold("b.md", 50, 60)))
    q3 = Question("q3", "?", "a", (Gold("c.md", 0, 10),))
    rankings = [
        [R("x.md", 0, 10), R("a.md", 0, 10)],                                  # q1: hit at rank 2
        [R("b.md", 0, 10), R("b.md", 0, 12), R("x.md", 0, 1), R("b.md", 50, 60)],  # q2: g0 rank 1, g1 rank 4
        [R("c.md", 9, 10)] * 3,                                                # q3: 10% overlap: never a hit
    ]
    m, multi = score([q1, q2, q3], rankings, [1, 5])
    # recall@1: q1 0, q2 1/2, q3 0 -> 1/6 ; recall@5: q1 1, q2 1, q3 0 -> 2/3
    assert m["recall@1"] == pytest.approx(1 / 6, abs=1e-4)
    assert m["recall@5"] == pytest.approx(2 / 3, abs=1e-4)
    # MRR@10: q1 1/2, q2 1, q3 0 -> 0.5
    assert m["mrr@10"] == pytest.approx(0.5, abs=1e-4)
    assert m["hit_rate@5"] == pytest.approx(2 / 3, abs=1e-4)
    assert multi == 0


def test_a_repeat_hit_does_not_count_twice_and_keeps_positions():
    q = Question("q", "?", "t", (Gold("a.md", 0, 10),))
    run, _ = ranking_to_run(q, [R("a.md", 0, 10), R("a.md", 0, 10), R("a.md", 0, 10)])
    assert len(run) == 3 and sum(1 for k in run if "#g" in k) == 1


def test_chunk_hitting_two_golds_is_counted():
    q = Question("q", "?", "t", (Gold("a.md", 0, 10), Gold("a.md", 10, 20)))
    run, multi = ranking_to_run(q, [R("a.md", 0, 20)])
    assert multi == 1 and {k for k in run if "#g" in k} == {"q#g0", "q#g1"}
