"""What users marked, as training pairs for the query adapter (`rag train-adapter --from-feedback`).

An answer users marked right (score 1) makes each passage it cited a positive pair with its question, as a
gold span does; an answer marked wrong (score -1) makes each passage it cited a negative pair: the fit lowers
that passage's share for that question. The passages are the answer's citations as the ledger recorded them
(query_citations, m023: what an LLM answer marked with [n], else every passage sent; an extractive answer's
excerpts). A passage is found again in the training collection by its chunk id, else by its document and
range (adapter_train.Corpus.passage_rows); one that is in no training document is counted, not used.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np

from rag_app.evaluation.qa import Question


@dataclass(frozen=True)
class Marked:
    """One marked answer: its question, the users' net word (1 right, -1 wrong) and the passages it cited
    as (chunk id, document, char_start, char_end)."""

    question: str
    score: int
    cited: tuple[tuple[str | None, str, int, int], ...]


@dataclass(frozen=True)
class Feedback:
    marked: tuple[Marked, ...]
    source: str  # where it was read (the ledger, its password redacted)

    @property
    def sha256(self) -> str:
        rows = [[m.question, m.score, [list(c) for c in m.cited]] for m in self.marked]
        return hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode()).hexdigest()

    def counts(self) -> dict:
        return {"answers_right": sum(m.score > 0 for m in self.marked),
                "answers_wrong": sum(m.score < 0 for m in self.marked)}

    def examples(self, corpus, embeddings, max_chars: int) -> tuple[np.ndarray, list[list[list[int]]], list[list[int]], dict]:
        """(question vectors, each question's positive passages as golds, its negative passages, what the
        training record says of them). A marked answer none of whose passages is in the training collection
        teaches nothing and is left out (counted)."""
        from rag_app.evaluation.adapter_train import question_vectors

        kept: list[Marked] = []
        golds: list[list[list[int]]] = []
        negatives: list[list[int]] = []
        unmatched = 0
        for m in self.marked:
            rows = []
            for chunk_id, doc, start, end in m.cited:
                found = corpus.passage_rows(doc, start, end, chunk_id)
                unmatched += not found
                if found:
                    rows.append(found)
            if not rows:
                continue
            kept.append(m)
            golds.append(rows if m.score > 0 else [])
            negatives.append(sorted({r for found in rows for r in found}) if m.score < 0 else [])
        questions = [Question(f"feedback-{i}", m.question, "feedback", ()) for i, m in enumerate(kept)]
        vectors = question_vectors(questions, embeddings, max_chars)
        part = {**self.counts(), "answers_used": len(kept), "positive_pairs": sum(len(g) for g in golds),
                "negative_pairs": sum(len(n) for n in negatives), "citations_not_in_corpus": unmatched,
                "sha256": self.sha256, "source": self.source}
        return vectors, golds, negatives, part


def feedback_of(rows: list[dict], source: str) -> Feedback:
    """Feedback from the ledger's marked answers (tracing.ledger.Ledger.marked_answers: question, net score,
    citations); an answer with no recorded citation (marked before m023) teaches nothing and is left out."""
    marked = tuple(Marked(r["question"], r["score"],
                          tuple((c["chunk_id"], c["doc"] or "", int(c["char_start"] or 0), int(c["char_end"] or 0))
                                for c in r["citations"] if c["doc"]))
                   for r in rows)
    return Feedback(tuple(m for m in marked if m.cited), source)
