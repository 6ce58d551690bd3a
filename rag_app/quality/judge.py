"""An LLM judge (RAG_JUDGE_MODEL) grading live answers off the answer path.

    sampled(query_id, share)   whether a query is judged: a hash of its id, so every replica agrees
    JudgeJob                   what one grading needs, taken from the Answer after it was returned
    Judge                      one grading: prompts/judge/<version>.md -> the chat model (with retries)
                               -> Grades (faithfulness, relevance, judge_score in [0, 1])
    JudgeWorker                a bounded queue and one thread: `offer` never blocks and never raises; a
                               full queue drops the grading (counted); a failed grading is counted

A grading runs as a run of its own (`kind = 'judge'`, id `judge_run_id(<query>)`) under the same
CostTracer as a query: each request is an attempt row of stage `judge`, priced from the price table,
with its retries and timeouts, and the grades land in query_quality under the graded query with source
`judge`. The graded query's own rows, cost and budget never include the judge (docs/quality.md).
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import queue
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from langchain_core.runnables import RunnableConfig, RunnableLambda

from prompts import load_prompt
from rag_app.core import StageError
from rag_app.core import Answer, ScoredChunk
from rag_app.core import GRADES_QUERY, JUDGE_KIND, JUDGE_STAGE, judge_run_id
from rag_app.models import invoke_with_retries
from rag_app.query import format_context

log = logging.getLogger(__name__)
METRICS = ("faithfulness", "relevance")
_OBJECT = re.compile(r"\{.*\}", re.S)  # the reply's JSON object, inside a ```json fence or prose if need be


def sampled(query_id: str, share: float) -> bool:
    """Whether `query_id` is among the `share` (0..1) of queries judged: the first 8 bytes of a SHA-256 of
    the id against the share of 2**64, so every replica (and a replay) decides alike."""
    if share <= 0:
        return False
    if share >= 1:
        return True
    h = int.from_bytes(hashlib.sha256(f"judge|{query_id}".encode()).digest()[:8], "big")
    return h < share * 2**64


@dataclass(frozen=True)
class Grades:
    """The judge's grades of one answer; `judge_score` is their mean (what experiments can weigh)."""

    faithfulness: float
    relevance: float
    reason: str = ""
    model: str | None = None
    prompt_version: str | None = None
    source: ClassVar[str] = "judge"  # query_quality.source of its rows

    @property
    def score(self) -> float:
        return round((self.faithfulness + self.relevance) / 2, 4)

    def as_json(self) -> dict[str, float]:
        return {"faithfulness": self.faithfulness, "relevance": self.relevance, "judge_score": self.score}

    def details(self) -> dict[str, dict[str, str | None]]:
        """query_quality.detail per metric: why, by which model and prompt (on the judge_score row)."""
        return {"judge_score": {"reason": self.reason, "model": self.model, "prompt_version": self.prompt_version}}


def parse_grades(reply: str, *, model: str | None = None, prompt_version: str | None = None) -> Grades:
    """The judge's reply -> Grades. Anything but a JSON object with both grades as numbers in [0, 1] is a
    StageError (the judge run's row says so); a grade is never guessed or clamped into range."""
    obj = _reply_object(reply)
    grades = {name: _grade(obj, name) for name in METRICS}
    reason = obj.get("reason")
    return Grades(grades["faithfulness"], grades["relevance"], str(reason)[:500] if reason is not None else "",
                  model, prompt_version)


def _reply_object(reply: str) -> dict[str, Any]:
    """The JSON object in the reply (inside a fence or prose if need be); a StageError when there is none."""
    m = _OBJECT.search(reply or "")
    try:
        obj = json.loads(m.group(0)) if m else None
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        raise StageError(JUDGE_STAGE, f"reply is not a JSON object: {(reply or '')[:120]!r}")
    return obj


def _grade(obj: dict[str, Any], name: str) -> float:
    """One grade, a number in [0, 1] (true and false are not numbers here), rounded to 4 places."""
    v = obj.get(name)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= 1:
        raise StageError(JUDGE_STAGE, f"{name} must be a number from 0 to 1, got {v!r}")
    return round(float(v), 4)


@dataclass(frozen=True)
class JudgeJob:
    query_id: str
    question: str
    answer: str
    contexts: tuple[ScoredChunk, ...] = field(default=(), repr=False)
    variant: str | None = None
    experiment: str | None = None
    user_id: str | None = None  # who asked: the judge run is booked to the answer's user and key (evaluation
    api_key_id: str | None = None  # spend per user and key), never into the answer's own cost

    @classmethod
    def of(cls, answer: Answer, variant: str | None = None, experiment: str | None = None,
           user_id: str | None = None, api_key_id: str | None = None) -> JudgeJob:
        return cls(answer.query_id, answer.question, answer.text, tuple(answer.contexts), variant, experiment,
                   user_id, api_key_id)


@dataclass(frozen=True)
class JudgeRun:
    """A judge run's output as the CostTracer reads a query root's: its `quality`, booked to GRADES_QUERY."""

    quality: Grades
    mode: str = JUDGE_KIND


class Judge:
    """Grades one answer per call. `callbacks`: the CostTracer (and anything else observing runs)."""

    def __init__(self, chat: Any, *, model: str, prompt_version: str = "v1", max_retries: int = 2,
                 retry_base_s: float = 0.5, max_tokens: int | None = None, callbacks: Sequence[Any] = ()):
        self.chat, self.model, self.prompt_version = chat, model, prompt_version
        self.prompt = load_prompt("judge", prompt_version)  # a missing version is a ConfigError at start-up
        self.max_retries, self.retry_base_s, self.max_tokens = max_retries, retry_base_s, max_tokens
        self.callbacks = list(callbacks)
        self._run = RunnableLambda(self._grade).with_config(run_name=JUDGE_KIND)

    def grade(self, job: JudgeJob) -> Grades:
        """Raises on a failed call or a malformed reply (the run's ledger rows say which)."""
        config: RunnableConfig = {"callbacks": self.callbacks, "metadata": {
            "query_id": judge_run_id(job.query_id), "kind": JUDGE_KIND, "origin": JUDGE_KIND,
            "variant": job.variant, "experiment": job.experiment, "user_id": job.user_id,
            "api_key_id": job.api_key_id, GRADES_QUERY: job.query_id}}
        return self._run.invoke({"question": job.question, "job": job}, config=config).quality

    def _grade(self, inputs: dict[str, Any], config: RunnableConfig) -> JudgeRun:
        job: JudgeJob = inputs["job"]
        messages = self.prompt.format_messages(question=job.question, answer=job.answer,
                                               context=format_context(list(job.contexts)) or "(none)")
        reply, _, _ = invoke_with_retries(self.chat, messages, config, max_retries=self.max_retries,
                                          base_delay_s=self.retry_base_s, max_tokens=self.max_tokens,
                                          stage=JUDGE_STAGE)
        return JudgeRun(parse_grades(str(reply.content), model=self.model, prompt_version=self.prompt_version))


class JudgeWorker:
    """One background thread grading the sampled answers offered to it, from a bounded queue."""

    def __init__(self, judge: Judge, *, share: float, queue_size: int = 64,
                 admit: Callable[[JudgeJob], bool] | None = None):
        """`admit(job)`: whether the evaluation budgets let this grading through (rag_app/spend/budgets.py
        evaluation_admission; None: always). Asked when the grading's turn comes, in the worker: a spent
        budget stops grading, never an answer."""
        self.judge, self.share, self.admit = judge, share, admit
        self._queue: queue.Queue[JudgeJob | None] = queue.Queue(maxsize=queue_size)  # None: stop
        self._lock = threading.Lock()
        self.counts = {"offered": 0, "queued": 0, "judged": 0, "failed": 0, "dropped": 0, "over_budget": 0}
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="judge", daemon=True)
        self._thread.start()

    def _count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self.counts[what] += n

    def offer(self, job: JudgeJob) -> bool:
        """Queue `job` if its query is sampled; True when queued. Never blocks and never raises: the answer
        it grades has been given already."""
        try:
            if self._closed.is_set() or not sampled(job.query_id, self.share):
                return False
            self._count("offered")
            self._queue.put_nowait(job)
        except queue.Full:
            with self._lock:
                self.counts["dropped"] += 1
                dropped = self.counts["dropped"]
            if dropped == 1 or dropped % 100 == 0:  # a burst says so once per hundred, not per answer
                log.warning("judge queue full (%d waiting): query %s not judged (%d dropped so far)",
                            self._queue.maxsize, job.query_id, dropped)
            return False
        except Exception:  # never the answer's problem
            log.exception("judge offer failed for %s", getattr(job, "query_id", "?"))
            return False
        self._count("queued")
        return True

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is None:  # close() asks the thread to end
                    return
                self._judge(job)
            finally:
                self._queue.task_done()

    def _judge(self, job: JudgeJob) -> None:
        try:
            if self._closed.is_set():  # shutting down past its wait: not judged, said so
                self._count("dropped")
                return
            if self.admit is not None and not self.admit(job):  # an evaluation budget is spent
                self._count("over_budget")
                return
            self.judge.grade(job)
            self._count("judged")
        except Exception as e:  # a failed grading is its run's ledger rows, never a query's failure
            self._count("failed")
            log.warning("judge failed for query %s: %s", job.query_id, e)

    def drain(self, timeout_s: float | None = None) -> bool:
        """Wait until every queued grading has ended (tests, shutdown); False if `timeout_s` passed first."""
        end = None if timeout_s is None else time.monotonic() + timeout_s
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._queue.all_tasks_done.wait(left)
        return True

    def close(self, timeout_s: float = 5.0) -> None:
        """Take no more; give the queued gradings `timeout_s` to finish, then drop the rest (counted). A
        grading in flight past that is left to its daemon thread; its rows may not reach the ledger."""
        if self._closed.is_set():
            return
        finished = self.drain(timeout_s)
        self._closed.set()
        if not finished:
            log.warning("judge: %d gradings not finished at shutdown", self._queue.unfinished_tasks)
        try:
            self._queue.put(None, timeout=1.0)
        except queue.Full:
            return
        self._thread.join(timeout=1.0)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {**self.counts, "waiting": self._queue.qsize()}
