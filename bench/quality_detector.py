"""How well groundedness tells a faithful answer from an unfaithful one, on the labelled set
(bench/quality_set.py: answers of 18 kinds written over real passages with the real prompt).

Prints ROC-AUC of the score overall, by language and by kind (each unfaithful kind against every
faithful answer of its language; each faithful kind against every unfaithful one), the share of
refusals marked as refusals, the median groundedness per kind, precision and recall of the review list's
rule at its threshold (an answer is listed when its groundedness is at most REVIEW_AT or it has an
invalid citation; refusals are a separate list), and the CPU time per answer of the hot-path scoring
(mean, p50, p95, measured one answer at a time with process_time, each answer's passages new to the
caches).

The score of an answer for the AUC: its groundedness; 1.0 for an answer marked as a refusal (an honest
refusal is not unfaithful) or one with no claim at all.

    PYTHONPATH=$PWD python bench/quality_detector.py [--json out.json] [--show-misses N]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict

from bench.quality_set import Case, build_set
from rag_app.quality.signals import score_answer
from rag_app.quality.review import REVIEW_AT


def forget_passages() -> None:
    """Empty the per-passage caches: every answer is timed as if its passages were new (the English stem
    cache stays: a running service has seen the vocabulary)."""
    from rag_app.quality import claims, meaning

    for cache in (claims._passage_grams, claims._passage_units, claims._passage_sentences, meaning.words):
        cache.cache_clear()


def score_of(q) -> float:
    return 1.0 if q.refusal or q.groundedness is None else q.groundedness


def listed(q) -> bool:
    """The review list's rule (tracing/ledger/repository.py to_review), without the judge and feedback."""
    if q.refusal:
        return False
    return (q.groundedness is not None and q.groundedness <= REVIEW_AT) or bool(q.invalid_citations)


def auc(pos: list[float], neg: list[float]) -> float | None:
    from sklearn.metrics import roc_auc_score

    if not pos or not neg:
        return None
    return float(roc_auc_score([1] * len(pos) + [0] * len(neg), pos + neg))


def evaluate(cases: list[Case]) -> dict:
    scored, cpu = [], []
    for c in {c.lang: c for c in cases}.values():  # load the lexicons and the stemmer, as a running service has
        score_answer(c.question, c.answer, "llm", list(c.passages), labels=list(c.labels))
    for c in cases:
        forget_passages()
        t0 = time.process_time()
        q = score_answer(c.question, c.answer, "llm", list(c.passages), labels=list(c.labels))
        cpu.append(time.process_time() - t0)
        scored.append((c, q))
    by_lang: dict = defaultdict(lambda: ([], []))
    for c, q in scored:
        by_lang[c.lang][0 if c.faithful else 1].append(score_of(q))
    allpos = [s for p, _ in by_lang.values() for s in p]
    allneg = [s for _, n in by_lang.values() for s in n]
    kinds: dict = {}
    for kind in dict.fromkeys(c.kind for c, _ in scored):
        mine = [(c, q) for c, q in scored if c.kind == kind]
        lang, faithful = mine[0][0].lang, mine[0][0].faithful
        pos, neg = by_lang[lang]
        own = [score_of(q) for _, q in mine]
        grounded = [q.groundedness for _, q in mine if q.groundedness is not None]
        kinds[kind] = {"lang": lang, "faithful": faithful, "n": len(mine),
                       "auc": auc(own, neg) if faithful else auc(pos, own),
                       "median_groundedness": statistics.median(grounded) if grounded else None,
                       "refusal_marked": sum(q.refusal for _, q in mine) / len(mine),
                       "listed_for_review": sum(listed(q) for _, q in mine) / len(mine)}
    flagged = [(c, listed(q)) for c, q in scored]
    tp = sum(f and not c.faithful for c, f in flagged)
    fp = sum(f and c.faithful for c, f in flagged)
    fn = sum(not f and not c.faithful for c, f in flagged)
    refusals = [q.refusal for c, q in scored if c.kind in ("refusal", "en_refusal")]
    false_refusals = [q.refusal for c, q in scored if c.kind not in ("refusal", "en_refusal")]
    ms = sorted(x * 1000 for x in cpu)
    return {"answers": len(scored), "auc": auc(allpos, allneg),
            "auc_by_language": {lang: auc(p, n) for lang, (p, n) in sorted(by_lang.items())},
            "auc_without_refusals": auc([score_of(q) for c, q in scored if c.faithful and "refusal" not in c.kind], allneg),
            "refusals_marked": sum(refusals) / len(refusals) if refusals else None,
            "other_answers_marked_refusal": sum(false_refusals) / len(false_refusals) if false_refusals else None,
            "review_threshold": REVIEW_AT,
            "review_precision": tp / (tp + fp) if tp + fp else None, "review_recall": tp / (tp + fn) if tp + fn else None,
            "cpu_ms_per_answer": {"mean": statistics.fmean(ms), "p50": ms[len(ms) // 2],
                                  "p95": ms[int(len(ms) * 0.95)], "max": ms[-1]},
            "kinds": kinds, "_scored": scored}


def _f(x, pct=False) -> str:
    if x is None:
        return "-"
    return f"{x:.1%}" if pct else f"{x:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--show-misses", type=int, default=0, help="print this many misjudged answers per kind")
    args = ap.parse_args()
    res = evaluate(build_set())
    print(f"{res['answers']} labelled answers; ROC-AUC {_f(res['auc'])} "
          f"(zh {_f(res['auc_by_language'].get('zh'))}, en {_f(res['auc_by_language'].get('en'))}; "
          f"without refusals {_f(res['auc_without_refusals'])})")
    print(f"refusals marked {_f(res['refusals_marked'], True)}; other answers marked refusal "
          f"{_f(res['other_answers_marked_refusal'], True)}")
    print(f"review list (groundedness <= {REVIEW_AT} or an invalid citation): precision "
          f"{_f(res['review_precision'], True)}, recall {_f(res['review_recall'], True)}")
    c = res["cpu_ms_per_answer"]
    print(f"CPU per answer: mean {c['mean']:.2f} ms, p50 {c['p50']:.2f} ms, p95 {c['p95']:.2f} ms, max {c['max']:.2f} ms")
    print(f"{'kind':<20}{'lang':>5}{'label':>11}{'n':>5}{'AUC':>8}{'median g':>10}{'listed':>9}")
    for kind, k in res["kinds"].items():
        print(f"{kind:<20}{k['lang']:>5}{'faithful' if k['faithful'] else 'unfaithful':>11}{k['n']:>5}"
              f"{_f(k['auc']):>8}{_f(k['median_groundedness']):>10}{_f(k['listed_for_review'], True):>9}")
    if args.show_misses:
        shown: dict = defaultdict(int)
        for case, q in res["_scored"]:
            wrong = listed(q) if case.faithful else not listed(q)
            if wrong and shown[case.kind] < args.show_misses:
                shown[case.kind] += 1
                print(f"--- {case.case_id} g={q.groundedness} refusal={q.refusal}\n{case.answer}")
                for cl in q.claims:
                    print(f"   {cl.supported} {cl.why}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({k: v for k, v in res.items() if not k.startswith("_")}, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
