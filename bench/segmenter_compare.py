"""Could another Chinese segmenter replace jieba in BM25 without changing a token? jieba's `cut_for_search`
is about half of ingest's BM25 CPU. This compares a drop-in candidate with jieba on what BM25 reads (every
legal_zh chunk, the Chinese and English dev questions, article references taken out as sparse.tokenize
does), after BM25's own token filter, plus text no dictionary knows (random CJK characters, where jieba's
HMM takes over) and random short strings of mixed scripts and punctuation. Same tokens everywhere is the bar: anything else needs a new TOKENIZER_VERSION and
every collection rebuilt. CPU seconds of each, in this process.

    pip install --target DIR jieba-next   # or rjieba, jieba-fast-dat: kept out of the project's venv
    .venv/bin/python bench/segmenter_compare.py --module jieba_next --path DIR
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import CORPUS_ZH, QA_ZH, SHARED, machine_line  # noqa: E402
from bench.store_scale import bm25_corpus  # noqa: E402
from rag_app.text import sparse  # noqa: E402
from rag_app.text.legal_numbers import ARTICLE_REF  # noqa: E402

QA_EN = SHARED / "data" / "legal_en" / "qa_dev.jsonl"


def kept(words) -> list[str]:
    """What sparse.tokenize keeps of a segmenter's words."""
    return list(sparse.word_tokens(words))


# Latin letters and digits, ASCII and full-width punctuation, whitespace, common CJK (the legal corpus's own
# characters) and rare CJK jieba's Han class leaves out (U+3400-U+341F, U+9FD6-U+9FEE)
_FUZZ = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789") * 3 + list("-_.%+#&@/:'\"()[]") + [" ", " ", "\n", "\t"]
         + list("，。、：；（）《》“”！？１２３ＡＢＣａｂｃ　") + [chr(c) for c in range(0x3400, 0x3420)]
         + [chr(c) for c in range(0x9FD6, 0x9FEF)])


def fuzz_string(rng: random.Random) -> str:
    common = _common_cjk()
    return "".join(rng.choice(_FUZZ) if rng.random() < 0.45 else rng.choice(common) for _ in range(rng.randint(3, 60)))


_COMMON: list[str] = []


def _common_cjk() -> list[str]:
    """The 500 most frequent CJK characters of the Chinese dev questions."""
    if not _COMMON:
        counts = Counter(ch for line in QA_ZH.read_text(encoding="utf-8").splitlines() for ch in line
                         if "\u4e00" <= ch <= "\u9fa5")
        _COMMON.extend(ch for ch, _ in counts.most_common(500))
    return _COMMON


def load(module: str):
    m = importlib.import_module(module)
    for name in ("set_log_level", "setLogLevel"):
        if hasattr(m, name):
            getattr(m, name)(logging.WARNING)
            break
    if hasattr(m, "initialize"):
        m.initialize()
    if module == "rjieba":
        return lambda text: m.cut_for_search(text, True)
    return lambda text: list(m.cut_for_search(text))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", required=True, help="the candidate's import name, e.g. jieba_next, rjieba")
    ap.add_argument("--path", type=Path, help="a folder to import it from (pip install --target)")
    ap.add_argument("--random-chars", type=int, default=100_000, help="length of the unknown-text sample")
    ap.add_argument("--fuzz", type=int, default=3000, help="random short strings of mixed scripts and punctuation")
    args = ap.parse_args()
    print(machine_line())
    if args.path:
        sys.path.insert(0, str(args.path))
    parsed, _, _ = bm25_corpus()
    sets = {"chunks": [c.indexed_text() for _, cs in parsed for c in cs],
            "zh questions": [json.loads(line)["question"] for line in QA_ZH.read_text(encoding="utf-8").splitlines()],
            "en questions": ([json.loads(line)["question"] for line in QA_EN.read_text(encoding="utf-8").splitlines()]
                             if QA_EN.exists() else [])}
    rng = random.Random(3)
    sets["random CJK"] = ["".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(args.random_chars))]
    sets["fuzz"] = [fuzz_string(rng) for _ in range(args.fuzz)]
    jieba, other = load("jieba"), load(args.module)
    print(f"{args.module} against jieba over {CORPUS_ZH.parent.name} (tokens after BM25's filter)")
    print(f"{'texts':<14}{'n':>6}{'differ':>8}{'jieba s':>9}{'other s':>9}{'speed':>7}")
    for name, texts in sets.items():
        texts = [ARTICLE_REF.sub(" ", t) for t in texts]
        t = time.process_time()
        ref = [jieba(x) for x in texts]
        tj = time.process_time() - t
        t = time.process_time()
        got = [other(x) for x in texts]
        to = time.process_time() - t
        differ = [i for i, (a, b) in enumerate(zip(ref, got)) if kept(a) != kept(b)]
        print(f"{name:<14}{len(texts):>6}{len(differ):>8}{tj:>9.2f}{to:>9.2f}{tj / max(to, 1e-9):>6.1f}x")
        changed = Counter()
        for i in differ:
            a, b = Counter(kept(ref[i])), Counter(kept(got[i]))
            changed.update({f"-{k}": v for k, v in (a - b).items()})
            changed.update({f"+{k}": v for k, v in (b - a).items()})
        if changed:
            print("   most changed tokens:", ", ".join(f"{k[:20]} x{v}" for k, v in changed.most_common(6)))


if __name__ == "__main__":
    main()
