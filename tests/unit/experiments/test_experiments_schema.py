"""The experiments file is validated whole at load: one line naming the file, the field and the fix."""
from __future__ import annotations

import json

import pytest

from rag_app.core.errors import ConfigError
from rag_app.experiments.variants import ExperimentConfig

GOOD_EXP = {"control": "default", "treatment": "b", "rollout_pct": 10, "seed": "s"}


def load(tmp_path, cfg):
    f = tmp_path / "exp.json"
    f.write_text(json.dumps(cfg) if not isinstance(cfg, str) else cfg, encoding="utf-8")
    return ExperimentConfig.load(f)


@pytest.mark.parametrize("cfg,field,words", [
    ({"variants": {"b": {}}, "experiments": {"e": {**GOOD_EXP, "seed": 42}}}, "experiments.e.seed", "quotes"),
    ({"variants": {"b": {"top_n": "five"}}}, "variants.b.top_n", "whole number"),
    ({"variants": {"b": {"top_n": 30, "top_k": 10}}}, "variants.b", "must not exceed top_k"),
    ({"variants": {"b": {"retriever": "magic"}}}, "variants.b.retriever", "hybrid"),
    ({"variants": {"b": {"chunker": "nope"}}}, "variants.b", "legal"),
    ({"variants": {"b": {"prompt_version": "v99"}}}, "variants.b", "v1"),
    ({"variants": {"b": {}}, "experiments": {"e": {**GOOD_EXP, "rollout_pct": True}}}, "experiments.e.rollout_pct", ""),
    ({"variants": {"b": {}}, "experiments": {"e": {**GOOD_EXP, "rollout_pct": 101}}}, "experiments.e.rollout_pct", "100"),
    ({"variants": {"b": {}}, "experiments": {"e": {**GOOD_EXP, "mode": "canary"}}}, "experiments.e.mode", "shadow"),
    ({"variants": {"b": {}}, "experiments": {"e": {**GOOD_EXP, "colour": 1}}}, "experiments.e.colour", "allowed here"),
    ({"variants": {"b": {}}, "experiments": {"e": {**GOOD_EXP, "guardrails": {"min_cost_drop_pct": "10%"}}}},
     "experiments.e.guardrails.min_cost_drop_pct", "number"),
    ({"variants": {"b": {}}, "experiments": {"e": {**GOOD_EXP, "guardrails": {"max_error_rate": 0.01}}}},
     "experiments.e.guardrails.max_error_rate", "max_error_rate_increase"),
    ({"variants": {"b": {}}, "experiments": {"e": {**GOOD_EXP, "guardrails": {"srm_p": 5}}}},
     "experiments.e.guardrails.srm_p", ""),
    ({"variant": {}}, "variant", "allowed here: variants, experiments"),
    ({"experiments": {"e": GOOD_EXP}}, "", "unknown variant 'b'"),
    ("{not json", "", "not valid JSON"),
])
def test_bad_experiments_files_fail_in_one_line_naming_the_field(tmp_path, cfg, field, words):
    with pytest.raises(ConfigError) as e:
        load(tmp_path, cfg)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(tmp_path / "exp.json") + ": ")
    assert f": {field}: " in msg if field else True, msg
    assert words in msg, msg


def test_a_valid_file_keeps_only_the_keys_set(tmp_path):
    cfg = load(tmp_path, {"variants": {"b": {"top_n": 8, "retriever": "bm25", "table_weight": 1.5}},
                          "experiments": {"e": {**GOOD_EXP, "rollout_pct": 12.5, "mode": "shadow"}}})
    assert cfg.variants["b"] == {"top_n": 8, "retriever": "bm25", "table_weight": 1.5}
    assert cfg.experiments["e"].rollout_pct == 12.5 and cfg.experiments["e"].mode == "shadow"


def exp_with(**extra):
    return {"variants": {"b": {}}, "experiments": {"e": {**GOOD_EXP, **extra}}}


@pytest.mark.parametrize("extra,field,words", [
    ({"analysis": {"alpha": 0.5}}, "experiments.e.analysis.alpha", "0.2"),
    ({"analysis": {"method": "bayes"}}, "experiments.e.analysis.method", "sequential"),
    ({"analysis": {"method": "hybrid"}}, "experiments.e.analysis", "set planned_queries or planned_end"),
    ({"analysis": {"planned_end": "next week"}}, "experiments.e.analysis", "YYYY-MM-DD"),
    ({"analysis": {"expected_queries": "5000"}}, "experiments.e.analysis.expected_queries", "whole number"),
    ({"analysis": {"expected_queries": 0}}, "experiments.e.analysis.expected_queries", "10"),
    ({"analysis": {"primary_metric": "quality"}}, "experiments.e.analysis.primary_metric", "latency_ms"),
    ({"analysis": {"guardrail_metrics": ["cost_per_query"]}}, "experiments.e.analysis", "remove it from guardrail"),
    ({"analysis": {"guardrail_metrics": ["error_rate", "error_rate"]}}, "experiments.e.analysis", "twice"),
    ({"analysis": {"primary_alpha_share": 1.0}}, "experiments.e.analysis.primary_alpha_share", "less than 1"),
    ({"analysis": {"n_tune": 5000}}, "experiments.e.analysis.n_tune", "allowed here: method, alpha, expected_queries"),
    ({"ramp": {"steps": [10, 1]}}, "experiments.e.ramp", "must increase"),
    ({"ramp": {"steps": [1, 10, 200]}}, "experiments.e.ramp", "at most 100"),
    ({"ramp": {"steps": []}}, "experiments.e.ramp.steps", "at least 1"),
    ({"ramp": {"steps": [1, 10], "min_queries_per_step": 0}}, "experiments.e.ramp.min_queries_per_step", "1"),
    ({"ramp": {"steps": [1, 10], "every": "1h"}}, "experiments.e.ramp.every", "allowed here: steps, min_queries_per_step"),
    ({"ramp": {"steps": [5, 50]}}, "experiments.e", "rollout_pct 10 is not a step of the ramp"),
    ({"ramp": {"steps": [1, 10]}, "mode": "shadow"}, "experiments.e", "ramps need mode split"),
])
def test_bad_analysis_and_ramp_fail_in_one_line_naming_the_field(tmp_path, extra, field, words):
    with pytest.raises(ConfigError) as e:
        load(tmp_path, exp_with(**extra))
    msg = str(e.value)
    assert "\n" not in msg and f": {field}: " in msg and words in msg, msg


def test_analysis_and_ramp_reach_the_experiment(tmp_path):
    cfg = load(tmp_path, exp_with(analysis={"planned_end": "2026-12-01", "primary_metric": "latency_ms"},
                                  ramp={"steps": [1, 10, 50, 100]}))
    e = cfg.experiments["e"]
    assert e.analysis["planned_end"] == "2026-12-01" and e.analysis["primary_metric"] == "latency_ms"
    assert e.ramp == {"steps": [1, 10, 50, 100], "min_queries_per_step": 1000}
    assert load(tmp_path, exp_with()).experiments["e"].analysis is None  # none given: the defaults apply
