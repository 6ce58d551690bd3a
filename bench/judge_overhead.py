"""What the LLM judge adds to a live answer's latency: nothing it waits for.

Indexes 公司法 (BM25) in a temp folder, starts two local OpenAI-compatible servers (the answering model
and the judge), and answers N live questions through the query service three ways, in the same run:
judge off (the baseline), judge on at RAG_JUDGE_SAMPLE=1 with a judge that answers, and judge on with a
judge held (every grading waits: the queue fills and drops). Prints each way's p50 / p95 answer latency,
their ratio to the baseline, and the CPU time of one `JudgeWorker.offer` (the only work on the answer's
path).

    PYTHONPATH=$PWD python bench/judge_overhead.py [N]
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from rag_app.app import RagApp
from rag_app.quality.judge import JudgeJob, JudgeWorker
from rag_app.service.pool import VariantPool
from rag_app.service.query_service import QueryRequest, QueryService
from rag_app.spend.budgets import BudgetGate, Limits, load_budgets
from tests.conftest import COMPANY_LAW, LAWS, make_settings
from tests.fakes.openai_server import FakeOpenAI, Held, Reply

QUESTIONS = ["一人有限责任公司是什么？", "董事会由几人组成？", "股东会的职权有哪些？", "公司的注册资本如何缴纳？"]
GRADED = '{"faithfulness": 0.9, "relevance": 0.8, "reason": "ok"}'


def p(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[int(q) - 1] if len(xs) > 1 else xs[0]


def run(root: Path, n: int, judge_mode: str) -> tuple[list[float], dict]:
    gate = threading.Event()
    with FakeOpenAI() as llm, FakeOpenAI() as judge:
        judge.script = ([Held(gate, Reply(content=GRADED))] * n if judge_mode == "held"
                        else [Reply(content=GRADED)] * n)
        extra = {} if judge_mode == "off" else {"judge_model": "gpt-4o-mini", "judge_base_url": judge.base_url,
                                                 "judge_sample": 1.0, "judge_queue": 8}
        settings = make_settings(root, retriever="bm25", openai_base_url=llm.base_url, answer_cache_size=0,
                                 ledger_url=f"sqlite:///{root}/ledger-{judge_mode}.sqlite", **extra)
        pool = VariantPool(settings)
        service = QueryService(lambda: pool, BudgetGate(load_budgets(None), Limits(pool.base.prices.fx),
                                                        lambda fn: None), None, settings.data_dir)
        service.answer(QueryRequest(QUESTIONS[0]))  # warm
        times = []
        for i in range(n):
            t0 = time.perf_counter()
            service.answer(QueryRequest(QUESTIONS[i % len(QUESTIONS)]))
            times.append((time.perf_counter() - t0) * 1000)
        stats = pool.base.judge.stats() if pool.base.judge is not None else {}
        gate.set()
        pool.close()
    return times, stats


def offer_cpu_us(k: int = 20_000) -> float:
    class Never:  # a judge that is never reached: offer's own work only (share 0.5, the queue never full)
        def grade(self, job):
            pass

    worker = JudgeWorker(Never(), share=0.5, queue_size=k + 1)  # type: ignore[arg-type]
    jobs = [JudgeJob(f"q-{i}", "q", "a") for i in range(k)]
    t0 = time.process_time()
    for job in jobs:
        worker.offer(job)
    spent = time.process_time() - t0
    worker.close(timeout_s=5)
    return spent / k * 1e6


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with RagApp(make_settings(root, retriever="bm25")) as app:
            assert not app.ingest([LAWS / COMPANY_LAW]).errors
        base, _ = run(root, n, "off")
        print(f"{n} live answers each; answer latency (ms), p50 / p95, ratio of p50 to judge off")
        print(f"  judge off          {p(base, 50):7.1f} / {p(base, 95):7.1f}   1.00")
        for mode in ("answers", "held"):
            times, stats = run(root, n, mode)
            print(f"  judge on, {mode:8} {p(times, 50):7.1f} / {p(times, 95):7.1f}   "
                  f"{p(times, 50) / p(base, 50):.2f}   judge: {stats}")
    print(f"JudgeWorker.offer: {offer_cpu_us():.1f} us of CPU per answer (sampling hash + queue put)")


if __name__ == "__main__":
    main()
