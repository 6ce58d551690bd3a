"""Whether an answer was right, beside what it cost: signals computed from nothing but the answer and
the passages sent, and an optional judge model off the answer's path.

    signals   the answer's quality: groundedness, claims, refusal, invalid citations, retrieval confidence
    claims    each sentence of an answer checked against the passages (citations, words, meaning)
    meaning   modality, negation, comparison and numbers of a claim against its passage sentences
    lexicon   the modal, negation and comparison words, and what a refusal says, in Chinese and English
    numbers   amounts, durations, percentages ... in Arabic or Chinese numerals, normalised
    units     the units claims and passages are compared in (CJK characters, English stems, digits)
    review    what puts an answer on the review list
    judge     an LLM judge grading a sample of live answers in the background

The tracer records them, the experiments' verdict reads them, the front doors show them. Import the
module you need; this file only names them."""

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from rag_app.quality.judge import Judge, JudgeJob, JudgeWorker
    from rag_app.quality.review import JUDGE_REVIEW_AT, REVIEW_AT
    from rag_app.quality.signals import quality_of


if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)

__all__ = ["JUDGE_REVIEW_AT", "REVIEW_AT", "Judge", "JudgeJob", "JudgeWorker", "quality_of"]
