"""Retrieval and chunking evaluation (`rag eval`): QA files with gold char spans -> ranx metrics, and the
training the learned parts of the query path are fitted by.
`qa` reads and splits question files, `harness` ingests and runs each chunker/retriever, `hits` and
`scoring` decide a hit within a token budget, `stats` and `budget` give intervals and budgets, `split` the fixed tune/validate split, `render`
and `compare_cli` print the tables; `integrity` measures chunks without questions and `candidates` says
where the misses are (ranked too low, or never a candidate).
Training: `ranker_train` fits the learned ranker, `adapter_train` the query adapter, on gold questions,
on pairs `mined_pairs` draws from the corpus's own text and on what users marked (`feedback_pairs`)."""

from typing import TYPE_CHECKING

from rag_app.core import lazy_face

if TYPE_CHECKING:
    from rag_app.evaluation.adapter_train import train as train_adapter
    from rag_app.evaluation.compare_cli import run_compare
    from rag_app.evaluation.feedback_pairs import feedback_of
    from rag_app.evaluation.harness import EvalSpec, run_eval
    from rag_app.evaluation.hits import covers
    from rag_app.evaluation.qa import load_qa
    from rag_app.evaluation.ranker_train import train as train_ranker
    from rag_app.evaluation.render import diff_table, eval_tables, print_budgets

__all__ = ["EvalSpec", "covers", "diff_table", "eval_tables", "feedback_of", "load_qa", "print_budgets",
           "run_compare", "run_eval", "train_adapter", "train_ranker"]

if not TYPE_CHECKING:  # rag_app/core/face.py
    __getattr__, __dir__ = lazy_face(__name__)
