"""A knob of the query path is declared once (rag_app/query/knobs.py) and read under that one name by every
door: the environment (RAG_<NAME>, `Settings`), the query configuration (`QueryConfig`), an experiment's
variant and `rag eval --lever-param`. prf_docs stands for any lever's knob (it was only a `LeverParams` field
before); top_n and query_rewrite for the ones that had other names in the query configuration."""
from __future__ import annotations

import json

import pytest

from rag_app.config.settings import Settings, load_settings
from rag_app.core.errors import ConfigError
from rag_app.experiments.schema import Variant, parse_config
from rag_app.query.knobs import LeverKnobs, QueryKnobs, lever_overrides
from rag_app.query.pipeline import QueryConfig


def test_each_knob_is_one_field_of_the_settings_the_configuration_and_the_variant():
    for model in (Settings, QueryConfig, Variant):
        for name, field in QueryKnobs.model_fields.items():
            theirs = model.model_fields[name]
            assert (theirs.annotation, theirs.default, theirs.metadata) == (field.annotation, field.default,
                                                                            field.metadata), (model, name)
    assert set(LeverKnobs.model_fields) <= set(QueryKnobs.model_fields)


def test_one_name_through_every_door(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RAG_PRF_DOCS", "5")
    monkeypatch.setenv("RAG_QUERY_REWRITE_MAX_TOKENS", "64")
    settings = load_settings()
    config = QueryConfig.from_settings(settings)
    assert (settings.prf_docs, config.prf_docs) == (5, 5)
    assert (settings.query_rewrite_max_tokens, config.query_rewrite_max_tokens) == (64, 64)
    variants, _ = parse_config(json.dumps({"variants": {"b": {"prf_docs": 7, "top_n": 4, "query_rewrite": False}}}),
                               "exp.json")
    variant = QueryConfig.from_settings(settings.model_copy(update=variants["b"]))
    assert (variant.prf_docs, variant.top_n, variant.query_rewrite) == (7, 4, False)
    assert lever_overrides(["prf_docs=9"], "--lever-param") == {"prf_docs": 9}
    assert config.with_(prf_docs=9).prf_docs == 9


def test_a_name_that_is_no_knob_is_refused_never_ignored():
    with pytest.raises(TypeError, match="no setting levers"):
        QueryConfig().with_(levers="none")  # the old name of retrieval_levers
    with pytest.raises(ValueError, match="Extra inputs"):
        QueryConfig(rewrite=True)  # the old name of query_rewrite


@pytest.mark.parametrize("name,value,said", [("RAG_PRF_DOCS", "-1", "greater than or equal to 0"),
                                              ("RAG_RESCORE_FUSION", "linaer", "'rrf' or 'linear'"),
                                              ("RAG_TOP_N", "0", "greater than or equal to 1")])
def test_a_bad_knob_in_the_environment_is_one_line_naming_it(tmp_path, monkeypatch, name, value, said):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=f"{name}: .*{said}"):
        load_settings()


def test_a_variant_keeps_its_narrower_bounds_and_the_environment_its_own(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAG_TOP_K", "2000")  # accepted from the environment before the knobs were one model
    monkeypatch.setenv("RAG_TOP_N", "500")
    assert (load_settings().top_k, load_settings().top_n) == (2000, 500)
    for key, value in (("top_k", 2000), ("top_n", 500), ("table_weight", 101.0), ("attach_refs", 21)):
        with pytest.raises(ConfigError, match=f"variants.b: {key} \\({value}\\) must be at most"):
            parse_config(json.dumps({"variants": {"b": {key: value}}}), "exp.json")
    assert parse_config(json.dumps({"variants": {"b": {"top_k": 1000, "top_n": 100}}}), "exp.json")[0]["b"] == {
        "top_k": 1000, "top_n": 100}


@pytest.mark.parametrize("pair,said", [("prf_docs=x", "prf_docs takes a value like its default, 3"),
                                       ("rescore_fusion=linaer", "rescore_fusion='linaer': use rrf or linear"),
                                       ("expand_min_share=2", "less than or equal to 1"),
                                       ("top_n=3", "use NAME=VALUE with NAME one of rescore_model")])
def test_a_bad_lever_setting_names_the_flag_and_the_pair(pair, said):
    with pytest.raises(ValueError, match="^--lever-param") as e:
        lever_overrides([pair], "--lever-param")
    assert said in str(e.value)
