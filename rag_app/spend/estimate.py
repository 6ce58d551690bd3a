"""What one question may cost before it is asked: its LLM calls at their largest, in tokens and dollars.

    question_estimate(question, settings, prices, at=...) -> QuestionEstimate

A question's answer call sends a prompt of at most the passages' token budget (RAG_CONTEXT_TOKENS), the
answer template and the passages' labels (ANSWER_OVERHEAD_TOKENS) and the question (a token per character
at most: Chinese text never takes more), and replies with at most RAG_LLM_MAX_TOKENS; with the rewrite
lever on, one more call sends the rewrite template (REWRITE_OVERHEAD_TOKENS) and the question and replies
with at most RAG_QUERY_REWRITE_MAX_TOKENS. Priced at the price in force at `at` for the model the variant
calls (its peak price in peak hours), that is an upper bound of one question's bill, failed attempts aside.

`grading_estimate` is the same for one grading of an answer by the LLM judge (an evaluation budget's
reservation). Pure functions, shared by what reserves before a question runs: a hard budget's admission
(rag_app/spend/budgets.py) reserves its dollars, a key's tokens-per-minute limit its tokens. An
extractive variant (no LLM) costs nothing; an unpriced model's estimate has tokens and no price (None).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

# The shipped prompts, counted with each priced model family's tokenizer (o200k, DeepSeek's, Qwen's): the
# answer template is at most 161 tokens, each passage label ("[3] 《公司法》第二十条") about 15 for the
# RAG_TOP_N passages (10 by default); the rewrite template at most 153 (tests/unit/test_question_estimate.py
# holds the prompts to these bounds).
ANSWER_OVERHEAD_TOKENS = 400
# Packing counts the passages in cl100k tokens of their text; the model's own tokenizer and the passages'
# labels come on top: 25% more holds on every question of tests/fixtures/laws_qa.jsonl at two budgets
# (tests/integration/test_query_service.py)
CONTEXT_FRAME = 1.25
REWRITE_OVERHEAD_TOKENS = 200
JUDGE_OVERHEAD_TOKENS = 300  # the judge template: at most 251


@dataclass(frozen=True)
class EstimatedCall:
    stage: str  # generate | rewrite
    input_tokens: int
    output_tokens: int
    cost_nano: int | None  # None: the model has no price


@dataclass(frozen=True)
class QuestionEstimate:
    model: str | None  # None: no LLM call (an extractive variant)
    calls: tuple[EstimatedCall, ...] = ()

    @property
    def input_tokens(self) -> int:
        return sum(c.input_tokens for c in self.calls)

    @property
    def output_tokens(self) -> int:
        return sum(c.output_tokens for c in self.calls)

    @property
    def tokens(self) -> int:
        """What a tokens-per-minute limit should reserve for the question."""
        return self.input_tokens + self.output_tokens

    @property
    def cost_nano(self) -> int | None:
        """What a hard budget should reserve (nano-dollars); None: unpriced, so unknown, never $0."""
        if any(c.cost_nano is None for c in self.calls):
            return None
        return sum(c.cost_nano or 0 for c in self.calls)


def question_estimate(question: str, settings: Any, prices: Any, *, at: datetime | str | None = None,
                      use_llm: bool | None = None) -> QuestionEstimate:
    """The largest bill one question can run up on `settings`' model (its variant's settings: RAG_LLM_MODEL,
    RAG_LLM_PROVIDER, RAG_CONTEXT_TOKENS, RAG_LLM_MAX_TOKENS, the rewrite lever), priced by `prices` (a
    PriceTable) at `at` (default: now). `use_llm`: whether the app answers with an LLM (default: the
    settings say; an app handed a chat model does)."""
    if not (settings.use_llm if use_llm is None else use_llm):
        return QuestionEstimate(None)
    prompt = int(settings.context_tokens * CONTEXT_FRAME) + ANSWER_OVERHEAD_TOKENS + len(question)
    shapes = [("generate", prompt, settings.llm_max_tokens)]
    if settings.rewrites:
        shapes.insert(0, ("rewrite", REWRITE_OVERHEAD_TOKENS + len(question), settings.query_rewrite_max_tokens))
    calls = tuple(EstimatedCall(stage, tin, tout, prices.quote(settings.llm_model, tin, tout,
                                                              provider=settings.llm_provider, at=at).cost_nano)
                  for stage, tin, tout in shapes)
    return QuestionEstimate(settings.llm_model, calls)


def grading_estimate(question: str, answer: str, context: str, settings: Any, prices: Any, *,
                     at: datetime | str | None = None) -> QuestionEstimate:
    """The largest bill grading one answer can run up on RAG_JUDGE_MODEL: the judge template, the question,
    the answer and the passages it was given (a token per character at most), RAG_JUDGE_MAX_TOKENS of
    reply, at the price in force at `at`."""
    tin = JUDGE_OVERHEAD_TOKENS + len(question) + len(answer) + len(context)
    tout = settings.judge_max_tokens
    cost = prices.quote(settings.judge_model, tin, tout, provider=settings.llm_provider, at=at).cost_nano
    return QuestionEstimate(settings.judge_model, (EstimatedCall("judge", tin, tout, cost),))
