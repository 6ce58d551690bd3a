"""The LLM judge's pure parts: reading its reply, choosing which queries it grades, its settings, its prompt."""
from __future__ import annotations

import uuid

import pytest

from prompts import load_prompt
from rag_app.config.settings import load_settings
from rag_app.core.errors import ConfigError, StageError
from rag_app.quality.judge import Grades, parse_grades, sampled

GOOD = [  # (reply, faithfulness, relevance)
    ('{"faithfulness": 0.8, "relevance": 0.6, "reason": "ok"}', 0.8, 0.6),
    ('```json\n{"faithfulness": 1, "relevance": 0}\n```', 1.0, 0.0),  # fenced, integers, no reason
    ('Grades: {"faithfulness": 0.25, "relevance": 0.75, "reason": "第57条"} done', 0.25, 0.75),
]
BAD = [  # (reply, what the error names)
    ("the answer looks fine to me", "not a JSON object"),
    ('{"faithfulness": 1.5, "relevance": 0.5}', "faithfulness"),  # out of range: never clamped
    ('{"faithfulness": -0.1, "relevance": 0.5}', "faithfulness"),
    ('{"faithfulness": 0.5}', "relevance"),  # missing
    ('{"faithfulness": "0.9", "relevance": 0.5}', "faithfulness"),  # a string is not a grade
    ('{"faithfulness": true, "relevance": 0.5}', "faithfulness"),  # nor is a boolean
    ('{"faithfulness": NaN, "relevance": 0.5}', "faithfulness"),
    ('[0.9, 0.5]', "not a JSON object"),
]


@pytest.mark.parametrize("reply,faithful,relevant", GOOD)
def test_a_well_formed_reply_reads_as_grades(reply, faithful, relevant):
    g = parse_grades(reply, model="judge-m", prompt_version="v1")
    assert (g.faithfulness, g.relevance) == (faithful, relevant)
    assert g.as_json() == {"faithfulness": faithful, "relevance": relevant,
                           "judge_score": round((faithful + relevant) / 2, 4)}
    assert g.details()["judge_score"]["model"] == "judge-m" and g.source == "judge"


@pytest.mark.parametrize("reply,names", BAD)
def test_anything_else_is_a_judge_error_never_a_guessed_grade(reply, names):
    with pytest.raises(StageError) as e:
        parse_grades(reply)
    assert e.value.stage == "judge" and names in str(e.value)


def test_judge_score_is_the_mean_of_the_two_grades():
    assert Grades(0.8, 0.6).score == 0.7 and Grades(1.0, 0.0).score == 0.5


# the hash is pinned: replicas (and releases) must choose the same queries for the same share
PINNED = [("q-1", 0.5, True), ("q-1", 0.4, False), ("q-7", 0.1, True), ("q-4", 0.1, False), ("q-8", 0.7, False),
          ("q-8", 0.75, True)]


@pytest.mark.parametrize("query_id,share,judged", PINNED)
def test_sampling_is_a_pinned_hash_of_the_query_id(query_id, share, judged):
    assert sampled(query_id, share) is judged


def test_sampling_takes_the_share_asked_and_a_larger_share_keeps_the_smaller_ones():
    ids = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"q{i}")) for i in range(20_000)]
    low = {q for q in ids if sampled(q, 0.1)}
    high = {q for q in ids if sampled(q, 0.3)}
    assert 0.09 < len(low) / len(ids) < 0.11 and 0.29 < len(high) / len(ids) < 0.31
    assert low <= high  # raising RAG_JUDGE_SAMPLE keeps judging the queries judged before
    assert not any(sampled(q, 0) for q in ids[:1000]) and all(sampled(q, 1) for q in ids[:1000])


def test_judge_sample_outside_0_to_1_is_a_one_line_error_naming_it(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no .env but the test's
    monkeypatch.setenv("RAG_JUDGE_SAMPLE", "1.5")
    with pytest.raises(ConfigError) as e:
        load_settings()
    assert "RAG_JUDGE_SAMPLE" in str(e.value) and "\n" not in str(e.value)
    monkeypatch.setenv("RAG_JUDGE_SAMPLE", "0.25")
    assert load_settings().judge_sample == 0.25 and load_settings().judge_model is None  # off unless a model is named


def test_a_judge_model_with_no_endpoint_is_refused_at_start_up(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAG_JUDGE_MODEL", "gpt-4o-mini")
    with pytest.raises(ConfigError, match="RAG_JUDGE_MODEL needs an endpoint"):
        load_settings()
    monkeypatch.setenv("RAG_JUDGE_BASE_URL", "not a url")
    with pytest.raises(ConfigError, match="RAG_JUDGE_BASE_URL"):
        load_settings()
    monkeypatch.setenv("RAG_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")
    assert load_settings().judge_model == "gpt-4o-mini"
    monkeypatch.setenv("RAG_JUDGE_MODEL", "")
    assert load_settings().judge_model is None  # empty: off, like unset


def test_the_judge_key_is_never_shown(tmp_path):
    from rag_app.config.settings import Settings

    s = Settings(_env_file=None, data_dir=tmp_path, judge_model="m", judge_api_key="sk-judge-secret",
                 judge_base_url="http://127.0.0.1:9/v1")
    assert "sk-judge-secret" not in repr(s) and "sk-judge-secret" not in str(s)


def test_the_judge_prompt_is_versioned_and_takes_question_passages_and_answer():
    prompt = load_prompt("judge", "v1")
    assert set(prompt.input_variables) == {"question", "context", "answer"}
    system = prompt.format_messages(question="q", context="c", answer="a")[0].content
    assert '{"faithfulness": <0..1>, "relevance": <0..1>' in system
    with pytest.raises(ConfigError, match="available: v1"):
        load_prompt("judge", "v999")
