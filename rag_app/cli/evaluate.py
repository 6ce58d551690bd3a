"""`rag eval` and `rag eval-compare`: retrieval, answers and their cost on labelled questions."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Optional

import typer

from rag_app.cli.args import at_least_one, existing, output_path, positive_ints
from rag_app.cli.common import err, fail, open_app, out, progress_bars
from rag_app.core.errors import RagError


def eval_cmd(qa: Path = typer.Option(..., help="QA JSONL with gold[].doc/char_start/char_end"),
             corpus: Path = typer.Option(..., help="corpus folder the gold docs are relative to"),
             chunker: list[str] = typer.Option(["legal"], help="chunker(s) to compare; repeat the flag"),
             retriever: list[str] = typer.Option(
                 ["default"], help="default (what `rag ask` runs: RAG_RETRIEVER + RAG_RETRIEVAL_LEVERS) | dense | bm25 "
                                   "| hybrid, optionally +lever... and @NAME=VALUE,... (its own lever settings); repeat the flag"),
             k: str = typer.Option("1,5,10", help="recall cut-offs"),
             limit: Optional[int] = typer.Option(None, help="only the first N questions"),
             force_dense: bool = typer.Option(False, help="keep the dense leg even if the model cannot read the corpus"),
             no_cite: bool = typer.Option(False, help="turn off citation-aware boosting"),
             output: Optional[Path] = typer.Option(None, "--out", help="write results (.json or .csv)"),
             runs: Optional[Path] = typer.Option(None, help="write raw rankings, one JSON line per question"),
             budgets: str = typer.Option("500,1000,2500", help="context-token budgets for recall within a budget"),
             split: Optional[str] = typer.Option(None, help="tune | validate: the fixed task-stratified half"),
             lever_param: list[str] = typer.Option([], help="lever setting NAME=VALUE (rag_app.query.levers.LeverParams); repeat"),
             scope: str = typer.Option("none", help="none | doc: search each question within its QA line's own `doc`"),
             llm: bool = typer.Option(False, "--llm", help="answer with RAG_LLM_MODEL (billed): cites-gold and "
                                                             "$ per correct answer for generated answers")):
    """Recall@k, recall within token budgets (95% CIs), MRR, nDCG, context tokens and $ per query for
    each chunker x retriever; every configuration after the first is compared with the first, paired."""
    from rag_app.chunking.registry import CHUNKERS
    from rag_app.evaluation.harness import EvalSpec, run_eval

    chunkers = [c for arg in chunker for c in arg.split(",")]
    if "all" in chunkers:
        chunkers = list(CHUNKERS)
    retrievers = _retriever_specs(retriever)
    from rag_app.query.levers import LEVERS, parse_retriever

    bad = ([r for r in retrievers if r.partition("@")[0] != "default" and not parse_retriever(r.partition("@")[0])]
           + [c for c in chunkers if c not in CHUNKERS])
    if bad:
        fail(ValueError(f"unknown chunker/retriever {bad}; chunkers: {', '.join(CHUNKERS)}; retrievers: default, dense, "
                         f"bm25, hybrid, optionally +lever ({', '.join(LEVERS)}), e.g. bm25+prf"))
    if split not in (None, "tune", "validate"):
        fail(ValueError(f"--split must be tune or validate, not {split!r}"))
    if scope not in ("none", "doc"):
        fail(ValueError(f"--scope must be none or doc, not {scope!r}"))
    try:  # before the work: an eval of minutes is not lost to a bad path at the end
        ks = positive_ints("--k", k)
        budget_list = positive_ints("--budgets", budgets, "500,1000,2500", allow_empty=True)
        at_least_one("--limit", limit)
        output_path("--out", output, (".json", ".csv"))
        output_path("--runs", runs)
        existing("--qa", qa), existing("--corpus", corpus, folder=True)
    except RagError as e:
        fail(e)
    params = _lever_params(lever_param)
    own = {r: _lever_params(r.partition("@")[2].split(","), f"--retriever {r!r}") for r in retrievers if "@" in r}
    for r in retrievers:
        _check_adapter(r, {**params, **own.get(r, {})})
    spec = EvalSpec(qa=qa, corpus=corpus, chunkers=chunkers, retrievers=retrievers,
                    ks=ks, limit=limit, runs_path=runs, force_dense=force_dense,
                    cite=not no_cite, budgets=budget_list, split=split, lever_params=params,
                    retriever_params=own, scope=scope, use_llm=llm)
    try:
        with open_app() as rag, progress_bars() as progress:
            result = run_eval(rag, spec, progress)
    except (RagError, FileNotFoundError) as e:
        fail(e)
    _print_eval(result, spec.ks)
    from rag_app.evaluation.render import print_budgets

    print_budgets(result, out)
    if output:
        _write_eval(result, output)
        err.print(f"wrote {output}")


def _retriever_specs(flags: list[str]) -> list[str]:
    """`--retriever` values split on commas; a piece NAME=VALUE belongs to the retriever before it, so
    `default,bm25+rescore+wide@rescore_unit=article,query_adapter=latest` is two retrievers, the second with
    its own lever settings (paired against the first in one run)."""
    specs: list[str] = []
    for piece in (p for arg in flags for p in arg.split(",")):
        if "=" in piece and "@" not in piece and specs and "@" in specs[-1]:
            specs[-1] += f",{piece}"
        else:
            specs.append(piece)
    return specs


def _check_adapter(retriever: str, params: dict) -> None:
    """What start-up refuses for RAG_QUERY_ADAPTER, refused for a retriever's adapter too, before any work."""
    if not params.get("query_adapter"):
        return
    from rag_app.config.settings import load_settings
    from rag_app.query.adapter import refusal

    settings = load_settings()
    legs_and_levers = retriever.partition("@")[0]
    levers = settings.retrieval_levers if legs_and_levers == "default" else legs_and_levers
    why = refusal(params["query_adapter"], levers.split("+"), params.get("rescore_model", settings.rescore_model),
                  "rescore_model")
    if why:
        fail(ValueError(f"--retriever {retriever!r}: query_adapter {why}"))


def _lever_params(pairs: list[str], flag: str = "--lever-param") -> dict:
    """NAME=VALUE pairs as LeverParams overrides, each checked before any work; `query_adapter=latest` is the
    newest adapter under the data dir, as RAG_QUERY_ADAPTER=latest is."""
    from rag_app.query.levers import LeverParams

    fields = LeverParams.__dataclass_fields__
    out = {}
    for p in pairs:
        key, _, val = p.partition("=")
        if key not in fields or not val:
            fail(ValueError(f"{flag} {p!r}: use NAME=VALUE with NAME one of {', '.join(fields)}"))
        try:
            out[key] = type(fields[key].default)(val)  # type: ignore[misc]  # every LeverParams field has a default
        except ValueError:
            fail(ValueError(f"{flag} {p!r}: {key} takes a value like its default, {fields[key].default!r}"))
    try:
        LeverParams(**out)  # the values' own checks (rescore_fusion, rescore_unit), before any work
    except ValueError as e:
        fail(ValueError(f"{flag}: {e}"))
    if out.get("query_adapter"):
        from rag_app.config.settings import load_settings
        from rag_app.query.adapter import adapter_path, load_adapter

        named = out["query_adapter"]
        try:
            out["query_adapter"] = adapter_path(named, load_settings().data_dir) if named == "latest" else named
            load_adapter(out["query_adapter"])
        except RagError as e:
            fail(ValueError(f"{flag} query_adapter={named}: {str(e).split(': ', 1)[-1]}"))
    return out


def eval_compare(base: str = typer.Argument(..., help="runs file from `rag eval --runs`, optionally FILE:chunker/retriever"),
                 new: str = typer.Argument(..., help="the other runs file, same form"),
                 qa: Path = typer.Option(..., help="the QA JSONL both runs answered"),
                 split: Optional[str] = typer.Option(None, help="tune | validate"),
                 k: str = typer.Option("1,5,10", help="recall cut-offs"),
                 budgets: str = typer.Option("500,1000,2500", help="context-token budgets"),
                 output: Optional[Path] = typer.Option(None, "--out", help="write the comparison as JSON")):
    """Paired comparison of two saved runs on the same questions: new - base with bootstrap 95% CIs."""
    from rag_app.evaluation.compare_cli import run_compare

    try:
        ks = positive_ints("--k", k)
        budget_list = positive_ints("--budgets", budgets, "500,1000,2500", allow_empty=True)
        output_path("--out", output)
    except RagError as e:
        fail(e)
    try:
        result = run_compare(base, new, qa, split, ks, budget_list)
    except (RagError, FileNotFoundError, ValueError) as e:
        fail(e)
    from rag_app.evaluation.render import diff_table

    out.print(f"{result['base_run']} -> {result['new_run']} on {result['questions']} questions (split: {result['split']})")
    out.print(diff_table("difference", result["diff"], result["diff_by_task"]))
    if output:
        output.write_text(json.dumps(result, ensure_ascii=False, indent=2), encoding="utf-8")
        err.print(f"wrote {output}")


def _print_eval(result: dict, ks: list[int]) -> None:
    """80-column tables (rag_app/evaluation/render.py), each configuration numbered, its chunker,
    retriever, legs and levers listed above them (too long for a column)."""
    from rag_app.evaluation.render import eval_tables

    out.print(f"retrieval on {result['questions']} questions ({result['qa']}); rerank: {result['reranker']}")
    for i, r in enumerate(result["results"], 1):
        what = f"skipped: {r['skipped']}" if r.get("skipped") else f"{r['legs']}; levers {r['levers']}"
        out.print(f"  {i}. {r['chunker']} / {r['retriever']} ({what})", markup=False)
    for table in eval_tables(result, ks):
        out.print(table)


def _write_eval(result: dict, path: Path) -> None:
    from rag_app.present.report_export import plain_row

    if path.suffix.lower() == ".csv":
        # a nested value (the per-budget recalls) as JSON, not Python's repr, so other tools can read it
        rows = [{k: json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v for k, v in r.items()}
                for r in result["results"]]
        fields = list(dict.fromkeys(k for r in rows for k in r))
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            w.writerows(plain_row(r) for r in rows)
    else:
        path.write_text(json.dumps(result, ensure_ascii=False, indent=2), encoding="utf-8")


def train_ranker_cmd(qa: Path = typer.Option(..., help="QA JSONL with gold[].doc/char_start/char_end"),
                     corpus: Path = typer.Option(..., help="corpus folder the gold docs are relative to"),
                     split: str = typer.Option("tune", help="tune | validate | all: the questions it learns from"),
                     pseudo: int = typer.Option(1000, help="pseudo-questions mined from the corpus (article openings)"),
                     pool_depth: int = typer.Option(50, help="each candidate view's top N that the ranker orders"),
                     seed: int = typer.Option(0, help="the model's random seed")):
    """Train the learned ranker (the `ranker` lever) on questions with gold spans plus pseudo-questions
    mined from the corpus; writes RAG_DATA_DIR/rankers/ranker-<version>.joblib and its training record."""
    from rag_app.evaluation.ranker_train import train

    if split not in ("tune", "validate", "all"):
        fail(ValueError(f"--split must be tune, validate or all, not {split!r}"))
    try:
        at_least_one("--pool-depth", pool_depth)
        existing("--qa", qa), existing("--corpus", corpus, folder=True)
        with open_app() as rag, progress_bars() as progress:
            path, record = train(rag, qa, corpus, split=None if split == "all" else split, pseudo=max(pseudo, 0),
                                 pool_depth=pool_depth, seed=seed, progress=progress)
    except (RagError, FileNotFoundError) as e:
        fail(e)
    out.print(f"ranker {record['version']}: {record['questions']} questions + {record['pseudo']} pseudo-questions, "
              f"{record['rows']} candidates ({record['positives']} gold), features {record['features_s']} s, "
              f"fit {record['fit_s']} s, {record['artefact_bytes']:,} bytes")
    out.print(f"wrote {path}; use it with RAG_RETRIEVAL_LEVERS=rescore+ranker+charge+colloquial+named RAG_RANKER=latest")


def train_adapter_cmd(qa: Path = typer.Option(..., help="QA JSONL with gold[].doc/char_start/char_end"),
                      corpus: Path = typer.Option(..., help="corpus folder the gold docs are relative to"),
                      split: str = typer.Option("tune", help="tune | validate | all: the questions it learns from"),
                      seed: int = typer.Option(0, help="the fit's random seed")):
    """Train a query adapter (RAG_QUERY_ADAPTER) on questions with gold spans: a linear map that moves each
    question's rescore vector towards the chunks holding its gold; writes RAG_DATA_DIR/adapters/
    adapter-<version>.npz and its training record."""
    from rag_app.evaluation.adapter_train import train

    if split not in ("tune", "validate", "all"):
        fail(ValueError(f"--split must be tune, validate or all, not {split!r}"))
    try:
        existing("--qa", qa), existing("--corpus", corpus, folder=True)
        with open_app() as rag, progress_bars() as progress:
            path, record = train(rag, qa, corpus, split=None if split == "all" else split, seed=seed,
                                 progress=progress)
    except (RagError, FileNotFoundError) as e:
        fail(e)
    seen = record["in_sample_dense_recall_at_20"]
    out.print(f"adapter {record['version']} over {record['model']}: {record['questions']} questions "
              f"({record['pairs']} gold spans) and {record['chunks']:,} chunks, embedding {record['embed_s']} s, "
              f"fit {record['fit_s']} s, {path.stat().st_size:,} bytes; dense recall@20 on its own questions "
              f"{seen['before']:.3f} -> {seen['after']:.3f} (in sample: bench/adapter_cv.py measures)")
    out.print(f"wrote {path}; use it with RAG_QUERY_ADAPTER=latest (or this path)")
