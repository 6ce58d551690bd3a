"""The `models` step alone: a key's model list against the route's variant, the chat model and the LLM."""
from __future__ import annotations

import pytest

from rag_app.access.keys import OPEN, Principal
from rag_app.access.rights import Forbidden
from rag_app.service.admission import CheckModels, QueryRequest


def test_a_key_limited_to_other_models_is_refused_naming_them(ctx):
    key = Principal("olive", "olive", "member", models=("some-other-model",))
    with pytest.raises(Forbidden, match="may not use default / gpt-4o-mini .*its models: some-other-model"):
        CheckModels().enter(ctx(QueryRequest("q", principal=key)))


@pytest.mark.parametrize("models", [("gpt-4o-mini",), ("default",), ("legal-rag",)])
def test_the_llm_the_variant_or_the_chat_model_on_the_list_passes(ctx, models):
    key = Principal("paul", "paul", "member", models=models)
    c = ctx(QueryRequest("q", principal=key, model="legal-rag"))
    CheckModels().enter(c)
    assert c.ticket is None and c.result is None  # it adds nothing


def test_a_key_without_a_list_passes(ctx):
    CheckModels().enter(ctx(QueryRequest("q", principal=OPEN)))
