"""`rag eval` and `rag eval-compare`: retrieval, answers and their cost on labelled questions."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Optional

import typer

from rag_app.cli.args import at_least_one, existing, output_path, positive_ints
from rag_app.cli.common import err, fail, open_app, out, progress_bars
from rag_app.core import RagError


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
             lever_param: list[str] = typer.Option([], help="lever setting NAME=VALUE (docs/settings.md, retrieval levers); repeat"),
             scope: str = typer.Option("none", help="none | doc: search each question within its QA line's own `doc`"),
             llm: bool = typer.Option(False, "--llm", help="answer with RAG_LLM_MODEL (billed): cites-gold and "
                                                             "$ per correct answer for generated answers")):
    """Recall@k, recall within token budgets (95% CIs), MRR, nDCG, context tokens and $ per query for
    each chunker x retriever; every configuration after the first is compared with the first, paired."""
    from rag_app.chunking import CHUNKERS
    from rag_app.evaluation import EvalSpec, run_eval

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
    from rag_app.evaluation import print_budgets

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
    from rag_app.config import load_settings
    from rag_app.query import refusal

    settings = load_settings()
    legs_and_levers = retriever.partition("@")[0]
    levers = settings.retrieval_levers if legs_and_levers == "default" else legs_and_levers
    why = refusal(params["query_adapter"], levers.split("+"), params.get("rescore_model", settings.rescore_model),
                  "rescore_model")
    if why:
        fail(ValueError(f"--retriever {retriever!r}: query_adapter {why}"))


def _lever_params(pairs: list[str], flag: str = "--lever-param") -> dict:
    """NAME=VALUE pairs of the levers' settings (rag_app/query/knobs.py), each checked as its RAG_NAME is, before
    any work; `query_adapter` takes none, auto and latest as RAG_QUERY_ADAPTER does (latest: the newest adapter
    under the data dir), or a path."""
    from rag_app.query import lever_overrides

    try:
        out = lever_overrides(pairs, flag)
    except ValueError as e:
        fail(e)
    if "query_adapter" in out:
        from rag_app.config import load_settings
        from rag_app.query import adapter_path, load_adapter

        named = out["query_adapter"]
        try:  # none, auto (the bundled one) and latest as RAG_QUERY_ADAPTER reads them; else a path
            if named in ("none", "auto", "latest"):
                settings = load_settings()
                out["query_adapter"] = adapter_path(named, settings.data_dir, out.get("rescore_model",
                                                                                     settings.rescore_model))
            if out["query_adapter"]:
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
    from rag_app.evaluation import run_compare

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
    from rag_app.evaluation import diff_table

    out.print(f"{result['base_run']} -> {result['new_run']} on {result['questions']} questions (split: {result['split']})")
    out.print(diff_table("difference", result["diff"], result["diff_by_task"]))
    if output:
        output.write_text(json.dumps(result, ensure_ascii=False, indent=2), encoding="utf-8")
        err.print(f"wrote {output}")


def _print_eval(result: dict, ks: list[int]) -> None:
    """80-column tables (rag_app/evaluation/render.py), each configuration numbered, its chunker,
    retriever, legs and levers listed above them (too long for a column)."""
    from rag_app.evaluation import eval_tables

    out.print(f"retrieval on {result['questions']} questions ({result['qa']}); rerank: {result['reranker']}")
    for i, r in enumerate(result["results"], 1):
        what = f"skipped: {r['skipped']}" if r.get("skipped") else f"{r['legs']}; levers {r['levers']}"
        out.print(f"  {i}. {r['chunker']} / {r['retriever']} ({what})", markup=False)
    for table in eval_tables(result, ks):
        out.print(table)


def _write_eval(result: dict, path: Path) -> None:
    from rag_app.present import plain_row

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
    from rag_app.evaluation import train_ranker

    if split not in ("tune", "validate", "all"):
        fail(ValueError(f"--split must be tune, validate or all, not {split!r}"))
    try:
        at_least_one("--pool-depth", pool_depth)
        existing("--qa", qa), existing("--corpus", corpus, folder=True)
        with open_app() as rag, progress_bars() as progress:
            path, record = train_ranker(rag, qa, corpus, split=None if split == "all" else split, pseudo=max(pseudo, 0),
                                 pool_depth=pool_depth, seed=seed, progress=progress)
    except (RagError, FileNotFoundError) as e:
        fail(e)
    out.print(f"ranker {record['version']}: {record['questions']} questions + {record['pseudo']} pseudo-questions, "
              f"{record['rows']} candidates ({record['positives']} gold), features {record['features_s']} s, "
              f"fit {record['fit_s']} s, {record['artefact_bytes']:,} bytes")
    out.print(f"wrote {path}; use it with RAG_RETRIEVAL_LEVERS=rescore+ranker+charge+colloquial+named RAG_RANKER=latest")


def train_adapter_cmd(qa: Optional[Path] = typer.Option(None, help="QA JSONL with gold[].doc/char_start/char_end "
                                                        "(optional with --from-feedback)"),
                      corpus: Path = typer.Option(..., help="corpus folder the gold docs are relative to"),
                      split: str = typer.Option("tune", help="tune | validate | all: the questions it learns from"),
                      from_feedback: bool = typer.Option(False, "--from-feedback", help="also learn from the ledger's "
                                                         "answers users marked right (their cited passages pulled "
                                                         "up) or wrong (pushed down)"),
                      feedback_collection: Optional[str] = typer.Option(None, help="only answers that read this "
                                                                        "collection (default: every one)"),
                      mined: int = typer.Option(0, help="pairs mined from the corpus's text (definitions, "
                                                "cross-references, headings) added to the questions"),
                      seed: int = typer.Option(0, help="the fit's random seed")):
    """Train a query adapter (RAG_QUERY_ADAPTER) on questions with gold spans, and with --from-feedback on what
    users marked: a linear map that moves each question's rescore vector towards the passages that answer
    it; writes RAG_DATA_DIR/adapters/adapter-<version>.npz, its training record, and a line in runs.jsonl."""
    from rag_app.evaluation import train_adapter

    if split not in ("tune", "validate", "all"):
        fail(ValueError(f"--split must be tune, validate or all, not {split!r}"))
    if qa is None and not from_feedback:
        fail(ValueError("--qa is needed (a QA JSONL with gold spans) unless --from-feedback gives what to learn from"))
    if mined < 0:
        fail(ValueError(f"--mined must be 0 or more, not {mined}"))
    try:
        if qa is not None:
            existing("--qa", qa)
        existing("--corpus", corpus, folder=True)
        feedback = _feedback(feedback_collection) if from_feedback else None
        held_out = {"tune": "validate", "validate": "tune"}.get(split) if qa is not None else None
        with open_app() as rag, progress_bars() as progress:
            path, record = train_adapter(rag, qa, corpus, split=None if split == "all" else split, seed=seed,
                                 progress=progress, feedback=feedback, mined=mined, validate_on=held_out)
    except (RagError, FileNotFoundError) as e:
        fail(e)
    _log_run(path, record)
    _print_adapter(path, record)


def _feedback(collection: str | None):
    """The ledger's marked answers, refused in one line when there are none to learn from."""
    from rag_app.config import load_settings
    from rag_app.evaluation import feedback_of
    from tracing.ledger import Ledger

    target = load_settings().ledger
    if not target.exists():
        raise RagError(f"--from-feedback: no ledger at {target}; answer and mark some questions first "
                       "(POST /v1/queries/ID/feedback), or leave --from-feedback out")
    with Ledger.open_read(target, migrated_copy=True) as ledger:
        feedback = feedback_of(ledger.marked_answers(collection), str(target))  # str(): never the password
    if not feedback.marked:
        where = f" of collection {collection!r}" if collection else ""
        raise RagError(f"--from-feedback: the ledger at {target} holds no answer{where} marked right or wrong with "
                       "its cited passages (marks on answers from before this version carry none)")
    return feedback


def _log_run(path: Path, record: dict) -> None:
    """Every training run, one JSON line in the adapters folder: what a later comparison starts from."""
    with (path.parent / "runs.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"artefact": path.name, **record}, ensure_ascii=False, sort_keys=True) + "\n")


def _print_adapter(path: Path, record: dict) -> None:
    seen = record.get("in_sample_dense_recall_at_20")
    line = (f"adapter {record['version']} over {record['model']} ({record['unit']} view): {record['questions']} "
            f"questions ({record['pairs']} gold spans in all) and {record['chunks']:,} chunks, embedding "
            f"{record['embed_s']} s, fit {record['fit_s']} s, {path.stat().st_size:,} bytes")
    if seen:
        line += (f"; dense recall@20 on its own questions {seen['before']:.3f} -> {seen['after']:.3f} (in sample: "
                 "bench/adapter_cv.py measures)")
    out.print(line)
    fb = record.get("feedback")
    if fb:
        out.print(f"feedback: {fb['answers_right']} answers marked right, {fb['answers_wrong']} wrong; {fb['answers_used']} "
                  f"used ({fb['positive_pairs']} positive, {fb['negative_pairs']} negative passages; "
                  f"{fb['citations_not_in_corpus']} cited passages not in --corpus)")
    if record.get("mined"):
        out.print(f"mined pairs: {record['mined']['pairs']} ({', '.join(f'{k} {v}' for k, v in record['mined']['kinds'].items())})")
    held = record.get("validate") or {}
    for group in ("all", "layperson"):
        if group in held:
            cells = ", ".join(f"{k} {v['before']:.3f} -> {v['after']:.3f}" for k, v in held[group].items())
            out.print(f"{held['split']} ({held['questions']} questions, not trained on), {group}: {cells}")
    out.print(f"wrote {path}; use it with RAG_QUERY_ADAPTER=latest (or this path), or compare it with the current "
              f'one as a gray release: a variant {{"query_adapter": "{path}"}} (docs/evaluation-and-levers.md)')
