"""`rag prices check --against litellm`: a second opinion from LiteLLM's bundled price map.

The comparison is tested on a small hand-written map (LiteLLM's field names, $ per token), so the 1%
rule, peak prices and missing fields are pinned down; the command itself runs against the real map
when the optional `litellm` extra is installed, and says how to install it when it is not."""
from __future__ import annotations

import importlib.util
import json

import pytest
from typer.testing import CliRunner

from rag_app.cli.main import app
from tracing.pricing import compare
from tracing.pricing import PriceTable

AT = "2026-11-01T00:00:00Z"


def chat(provider, **costs):
    return {"litellm_provider": provider, "mode": "chat", **costs}


MAP = {
    # LiteLLM lists DeepSeek's peak price: ours matches at peak (2 x $0.15 / $0.60 / $0.003)
    "deepseek/deepseek-flash": chat("deepseek", input_cost_per_token=3e-07, output_cost_per_token=1.2e-06,
                                    cache_read_input_token_cost=6e-09, cache_creation_input_token_cost=0.0),
    # 0.83% above our $0.60: within 1%
    "zai/glm-4.6": chat("zai", input_cost_per_token=6.05e-07, output_cost_per_token=2.2e-06,
                        cache_read_input_token_cost=1.1e-07),
    # 1.67% above: a difference
    "zai/glm-4.5": chat("zai", input_cost_per_token=6.1e-07, output_cost_per_token=2.2e-06),
    # cache hits at 40% of input there, 20% here
    "dashscope/qwen-plus": chat("dashscope", input_cost_per_token=4e-07, output_cost_per_token=1.2e-06,
                                cache_read_input_token_cost=1.6e-07),
    # tiered by prompt length (LiteLLM's `tiered_pricing`): compared tier by tier; 0.7.0 skipped these silently
    "dashscope/qwen-flash": chat("dashscope", tiered_pricing=[
        {"input_cost_per_token": 5e-08, "output_cost_per_token": 4e-07, "range": [0, 256000.0]},
        {"input_cost_per_token": 2.5e-07, "output_cost_per_token": 2e-06, "range": [256000.0, 1000000.0]}]),
    "dashscope/qwen3-max": chat("dashscope", tiered_pricing=[  # its middle tier 4% above ours
        {"input_cost_per_token": 1.2e-06, "output_cost_per_token": 6e-06, "range": [0, 32000.0]},
        {"input_cost_per_token": 2.5e-06, "output_cost_per_token": 1.2e-05, "range": [32000.0, 128000.0]},
        {"input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05, "range": [128000.0, 252000.0]}]),
    "dashscope/qwen3-coder-plus": chat("dashscope", tiered_pricing=[  # priced there, not here
        {"input_cost_per_token": 1e-06, "output_cost_per_token": 5e-06, "range": [0, 32000.0]}]),
    # neither a price nor tiers: listed as not compared
    "dashscope/qwen-omni-turbo": chat("dashscope"),
    # not a chat model, and a provider we do not carry: not compared
    "text-embedding-3-small": {"litellm_provider": "openai", "mode": "embedding", "input_cost_per_token": 2e-08},
    "mistral/mistral-large": chat("mistral", input_cost_per_token=2e-06, output_cost_per_token=6e-06),
}


def test_compare_lists_what_differs_by_more_than_one_percent():
    diffs, compared, skipped = compare(PriceTable(), MAP, at=AT)
    assert compared == 7
    got = {(d.model, d.field): (d.ours, d.theirs) for d in diffs}
    assert got == {("zai/glm-4.5", "input"): ("0.6", "0.61"),
                   ("dashscope/qwen-plus", "cache read"): ("0.08", "0.16"),
                   ("dashscope/qwen3-max", "input 32K-128K"): ("2.4", "2.5"),
                   ("dashscope/qwen3-coder-plus", "price 0-32K"): ("unpriced", "1 in")}
    assert skipped == [("dashscope/qwen-omni-turbo", "LiteLLM lists neither a price nor tiers")]
    # at 2025-12 our qwen-plus hits were 40% too: no difference then
    diffs, _, _ = compare(PriceTable(), MAP, at="2025-12-01T00:00:00Z")
    assert ("dashscope/qwen-plus", "cache read") not in {(d.model, d.field) for d in diffs}


def test_cli_without_litellm_says_how_to_install_it(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "litellm" else real(name, *a))
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path))
    res = CliRunner().invoke(app, ["prices", "check", "--against", "litellm"])
    assert res.exit_code == 2
    assert res.output.strip().count("\n") == 0 and "pip install 'legal-rag[litellm]'" in res.output
    assert CliRunner().invoke(app, ["prices", "check", "--against", "openrouter"]).exit_code != 0


def test_cli_against_the_real_litellm_map(tmp_path, monkeypatch):
    pytest.importorskip("litellm")
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path))
    res = CliRunner().invoke(app, ["prices", "check", "--against", "litellm", "--json", "--at", AT])
    got = json.loads(res.output)
    assert res.exit_code == (1 if got["differences"] else 0) and got["compared"] > 100
    by_model = {d["model"]: d for d in got["differences"]}
    # LiteLLM 1.110 still lists deepseek-chat at the V3.2 price; here it is retired since 2026-07-24
    assert by_model["deepseek/deepseek-chat"]["ours"] == "unpriced" and "retired" in by_model["deepseek/deepseek-chat"]["note"]
    assert "deepseek/deepseek-flash" not in by_model  # LiteLLM's peak price is ours at peak
