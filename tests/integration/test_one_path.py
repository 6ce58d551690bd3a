"""`rag eval` runs the query path `rag ask` runs: for the same question and settings the two rank the
same chunks in the same order, and eval's default retriever is the product's default."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_app.app import RagApp
from rag_app.evaluation.harness import DEFAULT_RETRIEVER, EvalSpec, run_eval
from tests.conftest import make_settings

QUESTIONS = ["一人有限责任公司的股东对公司债务承担什么责任？", "用人单位解除劳动合同应当提前多少日通知？",
             "申请仲裁应当交纳哪些费用？", "房东不给修房子怎么办？"]  # the last one uses a colloquial word


def qa_file(path, questions):
    with path.open("w", encoding="utf-8") as f:
        for i, q in enumerate(questions):
            f.write(json.dumps({"id": f"q{i}", "question": q, "task": "t",
                                "gold": [{"doc": "民法商法/公司法(2018-10-26).md", "char_start": 0, "char_end": 10}]},
                               ensure_ascii=False) + "\n")
    return path


def eval_and_ask(tmp_path, corpus, questions, **settings):
    runs = tmp_path / "runs.jsonl"
    with RagApp(make_settings(tmp_path, retriever="bm25", **settings)) as app:
        assert not app.ingest([corpus]).errors
        result = run_eval(app, EvalSpec(qa=qa_file(tmp_path / "qa.jsonl", questions), corpus=corpus,
                                        chunkers=["legal"], runs_path=runs))
        asked = [app.ask(q) for q in questions]
    evaluated = [json.loads(line) for line in runs.read_text(encoding="utf-8").splitlines()]
    return result, evaluated, asked, corpus


def spans(answer, corpus):
    return [(str(Path(c.chunk.source_path).relative_to(corpus.resolve())), c.chunk.char_start, c.chunk.char_end)
            for c in answer.ranked]


def test_eval_ranks_exactly_as_ask_with_the_same_settings(tmp_path, small_corpus):
    result, evaluated, asked, corpus = eval_and_ask(tmp_path, small_corpus, QUESTIONS,
                                                    retrieval_levers="charge+colloquial")
    assert result["results"][0]["retriever"] == DEFAULT_RETRIEVER
    assert result["results"][0]["levers"] == "charge+colloquial"
    for line, answer in zip(evaluated, asked):
        assert [(r["doc"], r["char_start"], r["char_end"]) for r in line["ranking"]] == spans(answer, corpus)
        assert line["levers"] == list(answer.levers)
    assert evaluated[3]["levers"] == ["colloquial"]  # 房东: the lever acted, and the row says so
    assert result["results"][0]["levers_acted"] == {"colloquial": 1}


@pytest.mark.slow  # e5-onnx embeds the candidates (rescore; eval embeds what ingest did not)
def test_eval_default_is_what_ask_runs_rescore_included(tmp_path, small_corpus):
    result, evaluated, asked, corpus = eval_and_ask(tmp_path, small_corpus, QUESTIONS[:1])
    row = result["results"][0]
    assert row["levers"] == "rescore+wide+charge+colloquial+named"
    assert row["levers_acted"] == {"rescore": 1, "wide": 1} and row["query_adapter"].startswith("a1-")
    assert [(r["doc"], r["char_start"], r["char_end"]) for r in evaluated[0]["ranking"]] == spans(asked[0], corpus)
    assert asked[0].levers == ("rescore", "wide")
