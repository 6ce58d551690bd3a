"""The experiments file is validated whole at load: one line naming the file, the field and the fix."""
from __future__ import annotations

import json

import pytest

from rag_app.errors import ConfigError
from rag_app.experiments import ExperimentConfig

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
