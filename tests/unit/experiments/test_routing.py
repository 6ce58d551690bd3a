"""Which variant answers a request, decided without a service: rag_app/experiments/routing.py."""
from __future__ import annotations

import pytest

from rag_app.core.errors import ConfigError
from rag_app.experiments.routing import route, served
from rag_app.experiments.variants import Experiment, ExperimentConfig

EXP = Experiment(name="topn", control="default", treatment="top1", rollout_pct=50, seed="s")
CONFIG = ExperimentConfig({"default": {}, "top1": {"top_n": 1}}, {"topn": EXP})


def test_outside_an_experiment_the_default_variant_answers_with_its_own_settings():
    r = route(CONFIG, None, "default", request_id="q1", user_id="u")
    assert (r.variant, r.app_variant, r.experiment, r.assignment, r.row()) == ("default", "default", None, None, {})


def test_a_rag_variant_label_not_in_the_file_is_answered_by_the_default_settings():
    r = route(CONFIG, None, "nightly", request_id="q1")
    assert (r.variant, r.app_variant) == ("nightly", "default")  # the rows say RAG_VARIANT; "default" answers


def test_a_variant_asked_for_by_name_answers_outside_the_experiment():
    r = route(CONFIG, EXP, "default", request_id="q1", user_id="u", variant="top1")
    assert (r.variant, r.app_variant, r.assignment) == ("top1", "top1", None)
    with pytest.raises(ConfigError, match="unknown variant 'nope'"):
        route(CONFIG, EXP, "default", request_id="q1", variant="nope")


def test_inside_an_experiment_a_user_keeps_an_arm_and_the_row_says_which():
    arms = {route(CONFIG, EXP, "default", request_id=f"q{i}", user_id=f"user{i}").assignment.arm  # type: ignore[union-attr]
            for i in range(40)}
    assert arms == {"control", "treatment"}  # 50%: both arms are drawn over 40 users
    first = route(CONFIG, EXP, "default", request_id="a", user_id="user7")
    again = route(CONFIG, EXP, "default", request_id="b", user_id="user7")
    assert first.variant == again.variant and first.app_variant == first.variant
    assert first.experiment == "topn" and first.row() == {"arm": first.assignment.arm, "sticky": 1}  # type: ignore[union-attr]
    anonymous = route(CONFIG, EXP, "default", request_id="c")
    assert anonymous.row()["sticky"] == 0  # only the request's own id: not sticky


def test_served_is_the_file_s_experiment_at_the_ramp_s_step():
    assert served(CONFIG, None) is None and served(CONFIG, "other") is None
    assert served(CONFIG, "topn") is EXP
    ramped = served(CONFIG, "topn", rollout_pct=0.0)
    assert ramped is not None and ramped.rollout_pct == 0.0 and EXP.rollout_pct == 50
    assert {route(CONFIG, ramped, "default", request_id=f"q{i}", user_id=f"u{i}").variant for i in range(20)} == {"default"}
