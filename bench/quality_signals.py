"""Cost of the per-answer quality signals (rag_app/quality/signals.py) against the rest of presenting an answer.

Builds answers from the corpus itself: for N articles of the legal_zh corpus (or the fixture laws when
the shared data is absent), the 8 neighbouring articles are the passages sent and the answer is five
sentences (two quoted from passage [1], two paraphrased, one invented with a passage never sent).
Prints the CPU time per answer of `score_answer` and, as the baseline run in the same process, of
`json.dumps` of the passages (what every answer's payload costs to serialise), and their ratio.

    PYTHONPATH=$PWD python bench/quality_signals.py [N]
"""
from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

from rag_app.quality.signals import score_answer
from tests.conftest import LAWS

CORPUS = Path(__file__).resolve().parents[2] / "shared/data/legal_zh/corpus"
ARTICLE = re.compile(r"(?m)^第[一二三四五六七八九十百千零]+条")
INVENTED = "根据《中华人民共和国劳动法》第九百九十九条，用人单位可以随时无理由辞退劳动者且无需支付任何补偿[7]。"


def articles() -> list[str]:
    root = CORPUS if CORPUS.exists() else LAWS
    out: list[str] = []
    for f in sorted(root.rglob("*.md")):
        text = f.read_text(encoding="utf-8")
        starts = [m.start() for m in ARTICLE.finditer(text)] + [len(text)]
        out += [text[a:b].strip() for a, b in zip(starts, starts[1:]) if b - a > 40]
    return out


def cpu_per_call(fn, cases) -> float:
    t0 = time.process_time()
    for c in cases:
        fn(c)
    return (time.process_time() - t0) / len(cases)


def main(n: int = 2000) -> None:
    arts = articles()
    cases = []
    for i in range(0, min(n, len(arts) - 8)):
        passages = arts[i:i + 8]
        first = [s for s in re.split(r"(?<=。)", passages[0]) if len(s) > 8][:2] or [passages[0][:60]]
        answer = "".join(s + "[1]" for s in first) + "这一规定适用于上述情形[2]。" * 2 + INVENTED
        cases.append(("这条规定是什么？", answer, passages))
    quality = cpu_per_call(lambda c: score_answer(c[0], c[1], "llm", c[2], [1.0] * 8), cases)
    baseline = cpu_per_call(lambda c: json.dumps({"passages": c[2], "answer": c[1]}, ensure_ascii=False), cases)
    grounded = [score_answer(c[0], c[1], "llm", c[2]).groundedness for c in cases[:200]]
    print(f"{len(cases)} answers of 5 sentences against 8 passages ({'corpus' if CORPUS.exists() else 'fixtures'})")
    print(f"score_answer  {quality * 1000:.3f} ms CPU per answer")
    print(f"json baseline {baseline * 1000:.3f} ms CPU per answer  ratio {quality / baseline:.1f}x")
    print(f"groundedness of these answers (2 quoted, 2 vague, 1 invented of 5): mean "
          f"{sum(g for g in grounded if g is not None) / len(grounded):.2f}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
