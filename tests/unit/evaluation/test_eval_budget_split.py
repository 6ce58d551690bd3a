"""The tune/validate split rule, recall within a token budget, and the bootstrap intervals."""
from __future__ import annotations

import random
from dataclasses import replace

import pytest

from rag_app.evaluation.budget import recall_at, recall_within, tokens_within, within_budget
from rag_app.evaluation.hits import Ranked
from rag_app.evaluation.qa import Gold, Question
from rag_app.evaluation.scoring import budget_report, compare_runs
from rag_app.evaluation.split import assign_splits, select_split
from rag_app.evaluation.stats import mean_ci, paired_diff_ci

# Fixed case table: if this changes, every published tune/validate figure changes with it.
SPLIT_CASES = [
    ("lecoqa-0001", "layperson_consultation", "tune"),
    ("lecoqa-0002", "layperson_consultation", "tune"),
    ("lecoqa-0003", "layperson_consultation", "validate"),
    ("lecoqa-0004", "layperson_consultation", "validate"),
    ("lecoqa-0005", "layperson_consultation", "tune"),
    ("lawbench-1-1-001", "recitation", "tune"),
    ("lawbench-1-1-002", "recitation", "validate"),
    ("lawbench-3-1-007", "case_facts_to_article", "tune"),
    ("lawbench-3-1-008", "case_facts_to_article", "validate"),
    ("templated-002", "templated_recitation", "tune"),
]


def test_split_case_table_is_fixed():
    got = assign_splits((qid, task) for qid, task, _ in SPLIT_CASES)
    assert got == {qid: side for qid, _, side in SPLIT_CASES}


def test_split_is_stratified_order_free_and_complete():
    items = [(f"q{i:04d}", f"task{i % 3}") for i in range(301)]
    a = assign_splits(items)
    shuffled = items[:]
    random.Random(1).shuffle(shuffled)
    assert assign_splits(shuffled) == a
    for t in ("task0", "task1", "task2"):
        n = sum(1 for _, tt in items if tt == t)
        assert sum(1 for q, tt in items if tt == t and a[q] == "validate") == n // 2


def test_split_rejects_duplicates_and_unknown_sides():
    with pytest.raises(ValueError, match="duplicate"):
        assign_splits([("a", "t"), ("a", "t")])
    qs = [Question(qid, "?", task, ()) for qid, task, _ in SPLIT_CASES]
    assert [q.id for q in select_split(qs, "validate")] == [c[0] for c in SPLIT_CASES if c[2] == "validate"]
    assert len(select_split(qs, None)) == len(qs)
    with pytest.raises(ValueError, match="tune, validate"):
        select_split(qs, "test")


def _q(qid="q", task="t", golds=((0, 100),)):
    return Question(qid, "?", task, tuple(Gold("a.md", s, e) for s, e in golds))


def test_the_chunk_that_crosses_the_budget_does_not_count_without_its_text():
    q = _q(golds=((1000, 1100),))
    ranking = [Ranked("a.md", 0, 200, 400, 3.0), Ranked("a.md", 1000, 1100, 700, 2.0), Ranked("a.md", 300, 400, 10, 1.0)]
    assert [r.tokens for r in within_budget(ranking, 1000)] == [400]  # 400 + 700 crosses; nothing after it
    assert recall_within(q, ranking, 1000) == 0.0
    assert recall_within(q, ranking, 1100) == 1.0  # exactly at the budget counts
    assert tokens_within(ranking, 1000) == 400
    assert recall_at(q, ranking, 2) == 1.0


def test_the_chunk_that_crosses_the_budget_counts_for_the_tokens_left_as_the_packer_cuts_it():
    from rag_app.query.context import pack_context
    from rag_app.text.tokens import count_tokens
    from rag_app.core.types import Chunk, ScoredChunk

    body = "第一条 为了保护民事主体的合法权益，调整民事关系，制定本法。" * 4
    first = Ranked("a.md", 0, 200, 400, 3.0)
    crossing = Ranked("a.md", 1000, 1000 + len(body), count_tokens(body), 2.0, text=body)
    head = len(body) // 4  # the gold span is the first sentence of the crossing chunk
    q = _q(golds=((1000, 1000 + head),))
    taken = within_budget([first, crossing], 400 + crossing.tokens // 2)
    assert len(taken) == 2 and taken[1].tokens <= crossing.tokens // 2 and body.startswith(taken[1].text)
    assert taken[1].char_end == 1000 + len(taken[1].text) and recall_within(q, [first, crossing], 400 + crossing.tokens // 2) == 1.0
    assert recall_within(q, [first, crossing], 401) == 0.0  # one token of it covers too little
    assert recall_within(q, [first, replace(crossing, text=None)], 400 + crossing.tokens // 2) == 0.0  # no text: not cut
    # the same cut as the context packer makes for the prompt
    c = Chunk(doc_id="a", source_path="/a.md", title="t", text=body, char_start=1000, char_end=1000 + len(body),
              token_count=crossing.tokens, chunker="legal", chunker_version="2", heading_path=(), chunk_id="a:1000")
    packed = pack_context([ScoredChunk(c, 1.0, 1)], budget=crossing.tokens // 2)
    assert packed.contexts[0].chunk.text == within_budget([crossing], crossing.tokens // 2)[0].text


def test_recall_is_the_share_of_gold_spans_covered_half_or_more():
    q = _q(golds=((0, 100), (500, 600)))
    assert recall_within(q, [Ranked("a.md", 40, 300, 50, 1.0)], 100) == 0.5  # covers 60% of the first
    assert recall_within(q, [Ranked("a.md", 60, 300, 50, 1.0)], 100) == 0.0  # 40%: not a hit
    assert recall_within(q, [Ranked("b.md", 0, 100, 50, 1.0)], 100) == 0.0  # other document


def test_bootstrap_intervals_bracket_the_mean_and_pairing_decides():
    xs = [1.0] * 60 + [0.0] * 40
    m = mean_ci(xs)
    assert m["ci95_low"] < m["mean"] == 0.6 < m["ci95_high"]
    assert mean_ci(list(reversed(xs))) == m  # question order does not move the interval
    base, new = [0.0] * 100, [1.0] * 30 + [0.0] * 70
    better = paired_diff_ci(base, new)
    assert better["verdict"] == "better" and better["ci95_low"] > 0
    assert paired_diff_ci(new, base)["verdict"] == "worse"
    same = paired_diff_ci([0.0, 1.0] * 50, [1.0, 0.0] * 50)
    assert same["verdict"] == "no difference" and same["ci95_low"] < 0 < same["ci95_high"]
    assert paired_diff_ci([1.0, 0.0] * 5, [1.0, 0.0] * 5)["verdict"] == "no difference"  # [0, 0] is not a gain
    with pytest.raises(ValueError, match="same questions"):
        paired_diff_ci([1.0], [1.0, 0.0])


def test_budget_report_per_task_and_compare_runs():
    qs = [_q("q1", "lay"), _q("q2", "lay"), _q("q3", "rec")]
    hit, miss = [Ranked("a.md", 0, 100, 300, 1.0)], [Ranked("a.md", 900, 1000, 300, 1.0)]
    overall, tasks, values = budget_report(qs, [hit, miss, hit], [5], [500])
    assert overall["recall_within_500"]["mean"] == pytest.approx(2 / 3, abs=1e-4)
    assert tasks["lay"]["recall_within_500"]["mean"] == 0.5 and tasks["rec"]["recall@5"]["mean"] == 1.0
    assert values["context_tokens_within_500"] == [300, 300, 300]
    res = compare_runs(qs, {"q1": miss, "q2": miss, "q3": miss}, {"q1": hit, "q2": hit, "q3": miss}, [5], [500])
    assert res["diff"]["recall_within_500"]["diff"] == pytest.approx(2 / 3, abs=1e-4)
    assert res["diff_by_task"]["rec"]["recall@5"]["diff"] == 0.0
