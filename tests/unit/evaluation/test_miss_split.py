"""The miss split and view recall (rag_app/evaluation/candidates.py) on fixed cases: every gold span is
found within the budget, a ranking miss (a candidate, past the budget) or a candidate miss, and the shares
add up to recall within the budget."""
from __future__ import annotations

import pytest

from rag_app.evaluation.budget import recall_within
from rag_app.evaluation.candidates import MissSplit, miss_table, split_misses, view_recall
from rag_app.evaluation.hits import Ranked
from rag_app.evaluation.qa import Gold, Question

A, B, C = Gold("law.md", 0, 100), Gold("law.md", 200, 300), Gold("other.md", 0, 50)


def chunk(doc, start, end, tokens):
    return Ranked(doc, start, end, tokens, 1.0, "条" * (end - start))


def q(*gold, task="layperson"):
    return Question(f"q{len(gold)}{task}", "?", task, tuple(gold))


CASES = [
    # (golds, ranking, candidates, expected (found, ranking miss, candidate miss))
    ((A,), [chunk("law.md", 0, 100, 100)], [], (1, 0, 0)),
    # the gold chunk is a candidate, but the chunk before it fills the budget
    ((A,), [chunk("x.md", 0, 900, 1000), chunk("law.md", 0, 100, 100)], [chunk("law.md", 0, 100, 100)], (0, 1, 0)),
    # a chunk covering under half of the gold does not hold it, in the ranking or among the candidates
    ((A,), [chunk("law.md", 60, 100, 40)], [chunk("law.md", 60, 100, 40)], (0, 0, 1)),
    # the same span in another document is not the gold
    ((C,), [chunk("law.md", 0, 50, 50)], [chunk("law.md", 0, 50, 50)], (0, 0, 1)),
    # two golds: one found, one only a candidate -> halves
    ((A, B), [chunk("law.md", 0, 100, 100), chunk("y.md", 0, 900, 950), chunk("law.md", 200, 300, 100)],
     [chunk("law.md", 200, 300, 100)], (0.5, 0.5, 0)),
    ((A, B, C), [], [chunk("law.md", 200, 300, 100)], (0, 1 / 3, 2 / 3)),
]


@pytest.mark.parametrize("gold, ranking, candidates, expected", CASES)
def test_each_gold_is_found_a_ranking_miss_or_a_candidate_miss(gold, ranking, candidates, expected):
    question = q(*gold)
    got = split_misses(question, ranking, candidates, 1000)
    assert (got.found, got.ranking_miss, got.candidate_miss) == pytest.approx(expected)
    assert got.found + got.ranking_miss + got.candidate_miss == pytest.approx(1.0)
    assert got.found == pytest.approx(recall_within(question, ranking, 1000))  # what `rag eval` reports


def test_the_crossing_chunk_counts_for_its_opening_as_the_budget_rule_cuts_it():
    """A gold whose chunk crosses the budget is found when the cut opening still covers half of it."""
    question = q(Gold("law.md", 0, 100))
    ranking = [chunk("x.md", 0, 940, 940), Ranked("law.md", 0, 100, 100, 1.0, "第" * 100)]
    assert split_misses(question, ranking, [], 1000).found == 1.0  # 60 tokens left: the first 60 chars, >= 50
    ranking = [chunk("x.md", 0, 970, 970), Ranked("law.md", 0, 100, 100, 1.0, "第" * 100)]
    assert split_misses(question, ranking, ranking, 1000).ranking_miss == 1.0  # 30 left: under half


def test_the_table_has_a_row_per_task_and_all_whose_shares_sum_to_one():
    qs = [q(A, task="layperson"), q(A, B, task="layperson"), q(C, task="case")]
    splits = [MissSplit(1, 0, 0), MissSplit(0.5, 0, 0.5), MissSplit(0, 1, 0)]
    rows = {r["task"]: r for r in miss_table(qs, splits)}
    assert list(rows) == ["case", "layperson", "all"]
    assert rows["layperson"]["n"] == 2 and rows["layperson"]["found"]["mean"] == 0.75
    assert rows["all"]["ranking_miss"]["mean"] == pytest.approx(0.3333, abs=1e-4)
    for r in rows.values():
        assert sum(r[o]["mean"] for o in ("found", "ranking_miss", "candidate_miss")) == pytest.approx(1, abs=1e-3)


def test_view_recall_cuts_each_view_at_each_depth_and_leaves_sets_whole():
    qs = [q(A), q(B)]
    far = [chunk("z.md", 0, 10, 10)] * 30
    views = [{"bm25": [chunk("law.md", 0, 100, 100)], "dense": far + [chunk("law.md", 0, 100, 100)],
              "union": far + [chunk("law.md", 0, 100, 100)]},
             {"bm25": [], "dense": [chunk("law.md", 200, 300, 100)], "union": [chunk("law.md", 200, 300, 100)]}]
    (row,) = [r for r in view_recall(qs, views, [20, 50], whole={"union"}) if r["task"] == "all"]
    assert (row["bm25@20"], row["bm25@50"], row["dense@20"], row["dense@50"]) == (0.5, 0.5, 0.5, 1.0)
    assert row["union"] == 1.0 and "union@20" not in row
