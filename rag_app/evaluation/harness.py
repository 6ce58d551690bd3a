"""`rag eval`: one index per chunker (its own Qdrant collection, reused while unchanged), every
question through the product's own query chain (chains/rag.py: the same stages, levers and packing
`rag ask` runs, with the LLM left out unless `--llm`), metrics from ranx, quality and cost side by side.
The default retriever is what `rag ask` runs (`default`: RAG_RETRIEVER with RAG_RETRIEVAL_LEVERS).
Nothing is written to the ledger. The hit rule and the run construction live in hits.py.

Beside recall, each configuration says how often the answer cites a gold passage (a citation's range
covers a gold span, the hit rule of hits.py) and what it spent per such answer: `$ per correct answer`
is the questions' whole cost over the answers that cite their gold, so a configuration that is cheaper
per query but right less often can cost more per right answer."""
from __future__ import annotations

import hashlib
import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from chains import build_rag
from rag_app.chunking import NEEDS_EMBEDDINGS, build_chunker
from rag_app.core import ConfigError
from rag_app.evaluation.hits import Ranked, covers, qrels_for, ranking_to_run
from rag_app.evaluation.integrity import article_integrity, sentence_integrity, size_stats
from rag_app.evaluation.qa import Question, load_qa
from rag_app.evaluation.scoring import DEFAULT_BUDGETS, budget_report, paired
from rag_app.evaluation.split import SPLIT_RULE, select_split, split_key
from rag_app.ingest import decide_collection, expand_paths, index_documents
from rag_app.ingest import load_document
from rag_app.query import marked_contexts
from rag_app.query.levers import levers_for, parse_retriever
from rag_app.core import usd_json
from rag_app.query import QueryConfig
from rag_app.query import legs_for
from rag_app.query import Scope
from rag_app.text import TOKENIZER_VERSION
from rag_app.core import Answer
from rag_app.core import totals

DEFAULT_RETRIEVER = "default"  # what `rag ask` runs: RAG_RETRIEVER + RAG_RETRIEVAL_LEVERS

Progress = Callable[[str, int, int], None]


@dataclass
class EvalSpec:
    qa: Path
    corpus: Path
    chunkers: list[str]
    retrievers: list[str] = field(default_factory=lambda: [DEFAULT_RETRIEVER])
    ks: list[int] = field(default_factory=lambda: [1, 5, 10])
    limit: int | None = None
    runs_path: Path | None = None
    force_dense: bool = False
    cite: bool = True
    budgets: list[int] = field(default_factory=lambda: list(DEFAULT_BUDGETS))
    split: str | None = None  # tune | validate | None (all)
    lever_params: dict = field(default_factory=dict)  # the levers' settings (`--lever-param k=v`; query/knobs.py)
    # one retriever's own overrides, after the shared ones (`--retriever bm25+rescore@rescore_unit=article`)
    retriever_params: dict[str, dict] = field(default_factory=dict)
    scope: str = "none"  # none | doc: each question searched within its QA line's own `doc`
    use_llm: bool = False  # answer with RAG_LLM_MODEL (billed) instead of the extractive answer


def _fingerprint(spec: EvalSpec, settings, chunker, docs, embed_model: str) -> str:
    h = hashlib.sha256()
    for part in (chunker.name, chunker.version, settings.chunk_target_min, settings.chunk_target_max,
                 settings.chunk_hard_max, settings.chunk_min_tokens, settings.semantic_threshold,
                 settings.contract_chunk_max, settings.contract_chunk_hard_max,
                 embed_model, spec.force_dense, TOKENIZER_VERSION, *sorted(d.content_hash for d in docs)):
        h.update(str(part).encode())
    return h.hexdigest()[:10]


def query_config(app, spec: EvalSpec, retriever: str, top_k: int) -> QueryConfig:
    """The query path `rag ask` runs, pointed at one retriever spec: `default` keeps the settings'
    retriever and levers; `bm25+prf` names its legs and levers exactly (no `auto`)."""
    base = app.query_config()
    legs_and_levers = retriever.partition("@")[0]  # what follows @: its own lever settings (spec.retriever_params)
    if legs_and_levers == DEFAULT_RETRIEVER:
        mode, levers = base.retriever, base.retrieval_levers
    else:
        parsed = parse_retriever(legs_and_levers)
        if parsed is None:
            raise ConfigError(f"unknown retriever {retriever!r}")
        mode, named = parsed
        levers = "+".join(named) or "none"
    params = {**spec.lever_params, **spec.retriever_params.get(retriever, {})}
    config = base.with_(retriever=mode, retrieval_levers=levers, top_k=top_k, cite=spec.cite, **params)
    if config.rewrites and not spec.use_llm:
        raise ConfigError(f"retriever {retriever!r}: the rewrite lever calls the LLM; run with --llm "
                          "(billed, OPENAI_BASE_URL set) or leave rewrite out (RAG_QUERY_REWRITE=0)")
    # eval waits for rescore, embeds what ingest did not, and calls the LLM only when asked to
    return config.with_(rescore_wait_s=None, rescore_vectors="query", use_llm=spec.use_llm)


@dataclass
class ConfigRun:
    """One chunker/retriever configuration asked every question: what the scores and the row are made of."""
    rankings: list[list[Ranked]] = field(default_factory=list)
    context_tokens: list[int] = field(default_factory=list)
    nano_usd: list[int | None] = field(default_factory=list)
    cites_gold: list[bool] = field(default_factory=list)
    levers_acted: Counter = field(default_factory=Counter)
    scoped: int = 0
    rerank_status: str = "skipped"

    def costs(self) -> dict:
        """$ per query and per correct answer (the whole spend over the answers citing their gold);
        None where a query is unpriced, or no answer cited its gold."""
        unknown = not self.nano_usd or None in self.nano_usd
        total = None if unknown else sum(self.nano_usd)  # type: ignore[arg-type]
        right = sum(self.cites_gold)
        return {"answers_citing_gold": round(right / len(self.cites_gold), 4) if self.cites_gold else None,
                "correct_answers": right,
                "usd_per_query": None if total is None else usd_json(round(total / len(self.nano_usd))),
                "usd_per_correct_answer": None if total is None or not right else usd_json(round(total / right))}


def ask_all(chain, questions: list[Question], spec: EvalSpec, rel: dict[str, str], label: str,
            runs_file, progress: Progress | None) -> ConfigRun:
    """Every question through one configuration's chain, in order; each ranking written as it goes."""
    run = ConfigRun()
    chunker, retriever = label.split("/", 1)
    for i, q in enumerate(questions, 1):
        answer: Answer = chain.invoke({"question": q.question, "scope": question_scope(q, spec.scope)},
                                      config={"metadata": {"query_id": f"eval-{q.id}"}})
        ranked = ranked_of(answer, rel)
        run.rankings.append(ranked)
        run.levers_acted.update(answer.levers)
        run.scoped += answer.scope is not None
        by_stage = {u.stage: u for u in answer.usage}
        run.rerank_status = by_stage["rerank"].status
        run.context_tokens.append(by_stage["generate"].context_tokens or 0)
        run.nano_usd.append(_query_cost(answer))
        run.cites_gold.append(cites_gold(answer, q, rel))
        if runs_file:
            runs_file.write(json.dumps({"qid": q.id, "chunker": chunker, "retriever": retriever,
                                        "levers": list(answer.levers), "cites_gold": run.cites_gold[-1], "ranking": [
                {"doc": r.doc, "char_start": r.char_start, "char_end": r.char_end, "tokens": r.tokens,
                 "score": r.score, "text": r.text} for r in ranked]}, ensure_ascii=False) + "\n")
            runs_file.flush()
        if progress:
            progress(f"eval {label}", i, len(questions))
    return run


def run_eval(app, spec: EvalSpec, progress: Progress | None = None) -> dict:
    """Each chunker indexed once (its own collection), each retriever asked every question, scored."""
    s = app.settings
    _check_llm(app, spec)
    questions = eval_questions(spec)
    corpus, docs, rel = load_corpus(spec.corpus)
    reranker, skip_reason = app.reranker()
    results: list[dict] = []
    per_task: list[dict] = []
    per_q: list[tuple[str, dict[str, list[float]]]] = []  # (config label, per-question values)
    top_k = max(s.top_k, max(spec.ks))
    # written as it goes (one line per question), so a long run that is stopped still leaves rankings
    with _runs_file(spec.runs_path) as runs_file:
        for retriever in spec.retrievers:  # before any work: an adapter is never scored on what it learned
            in_sample_refusal(retriever, query_config(app, spec, retriever, top_k), spec)
        for name in spec.chunkers:
            configs = {r: query_config(app, spec, r, top_k) for r in spec.retrievers}
            info, chunk_row = index_for_chunker(app, spec, name, configs, docs, progress)
            for retriever, config in configs.items():
                row, resolved, use_dense = _config_row(name, retriever, config, info, chunk_row)
                if config.retriever == "dense" and not use_dense:
                    results.append({**row, "skipped": info.dense_disabled_reason})
                    continue
                chain = build_rag(app.pipeline(config, info, rescore_required="rescore" in resolved))
                run = ask_all(chain, questions, spec, rel, f"{name}/{retriever}", runs_file, progress)
                overall, tasks, values = budget_report(questions, run.rankings, spec.ks, spec.budgets)
                results.append({**row, **run_row(run, questions, spec), "budgets": overall})
                per_q.append((f"{name}/{retriever}", values))
                per_task += task_rows(run, questions, spec, tasks, {"chunker": name, "retriever": retriever})
    return {"questions": len(questions), "qa": str(spec.qa), "corpus": str(corpus), "results": results,
            "split": spec.split or "all", "split_rule": SPLIT_RULE, "budgets": spec.budgets,
            "budget_rule": BUDGET_RULE, "paired_vs_first": _paired_vs_first(questions, per_q), "by_task": per_task,
            "llm_model": s.llm_model, "price_version": app.prices.version, "cost_rule": COST_RULE,
            "reranker": reranker.model_name if reranker else f"skipped: {skip_reason}"}


BUDGET_RULE = ("chunks in rank order while the total stays within the budget; the crossing chunk is cut "
               "to the tokens left (as the context packer cuts it), nothing after it counts")
COST_RULE = ("$/query: every stage at what it would bill on RAG_LLM_MODEL and the hosted-equivalent "
             "embed/rerank rates, the reply at its expected length (as `rag ask` prices an extractive "
             "answer's shadow; with --llm, the reply as billed); $/correct answer: the whole cost over "
             "the answers that cite a passage covering their gold")


def _check_llm(app, spec: EvalSpec) -> None:
    if spec.use_llm and not app.uses_llm:
        raise ConfigError("--llm: no LLM is configured; set OPENAI_BASE_URL and RAG_LLM_MODEL "
                          "(docs/operations.md), or leave --llm out for extractive answers")


def _runs_file(path: Path | None) -> AbstractContextManager[TextIO | None]:
    """The --runs file, open for writing (nothing without one)."""
    return Path(path).open("w", encoding="utf-8") if path else nullcontext()


def _config_row(chunker: str, retriever: str, config: QueryConfig, info, chunk_row: dict
                ) -> tuple[dict, tuple[str, ...], bool]:
    """A configuration's row before it is scored: the legs and levers it resolves to on this collection,
    and which adapter and ranker moved its questions; with the levers it resolved and whether its dense leg
    is on."""
    use_dense, use_sparse = legs_for(config.retriever, info)
    resolved = levers_for(config.retrieval_levers, info)
    row = {"chunker": chunker, "retriever": retriever, **chunk_row,
           "legs": "+".join(leg for leg, on in (("dense", use_dense), ("bm25", use_sparse)) if on),
           "levers": "+".join(resolved) or "none"}
    if "rescore" in resolved and config.query_adapter:  # which adapter moved the questions
        row["query_adapter"] = Path(config.query_adapter).stem.removeprefix("adapter-")
    if "ranker" in resolved:  # which trained model ranked (its artefact's file name holds the version)
        row["ranker"] = Path(config.ranker).stem.removeprefix("ranker-") or None
    return row, resolved, use_dense


def _paired_vs_first(questions: list[Question], per_q: list[tuple[str, dict[str, list[float]]]]) -> list[dict]:
    """Every configuration after the first, paired against the first over the same questions, overall and
    per task."""
    if not per_q:
        return []
    (base, base_values), tasks = per_q[0], sorted({q.task for q in questions})
    return [{"base": base, "new": label, "diff": paired(questions, base_values, vals),
             "diff_by_task": {t: paired(questions, base_values, vals, t) for t in tasks}}
            for label, vals in per_q[1:]]


def in_sample_refusal(retriever: str, config: QueryConfig, spec: EvalSpec) -> None:
    """A ConfigError when the retriever's query adapter learned the questions it would be scored on (the
    bundled adapter learned all of legal_zh's qa_dev: on qa_dev the default's adapter must be one trained on
    `tune` alone, scored on `validate`)."""
    from rag_app.query import trained_on

    path = config.query_adapter
    # the adapter moves questions only where rescore runs: named, or possibly under auto (a collection with no
    # dense leg of its own); `bm25` and the like never read it
    moves = config.retrieval_levers.strip() in ("auto", "") or "rescore" in config.retrieval_levers.split("+")
    why = trained_on(path, spec.qa, spec.split) if path and moves else None
    if why:
        raise ConfigError(f"retriever {retriever!r}: {why}; train one on another split (`rag train-adapter --split "
                          "tune`) and pass --lever-param query_adapter=PATH, or query_adapter=none")


def eval_questions(spec: EvalSpec) -> list[Question]:
    questions = select_split(load_qa(spec.qa), spec.split)
    if spec.split:  # hash order: a stopped run or --limit is a fair sample of every task, not the file's first
        questions.sort(key=lambda q: split_key(q.id))
    return questions[: spec.limit or None]


def load_corpus(folder: Path) -> tuple[Path, list, dict[str, str]]:
    """(the corpus folder, its parsed documents, each document's path relative to the folder)."""
    corpus = folder.resolve()
    files, problems = expand_paths([corpus])
    missing = [p for p in problems if p.status == "error"]
    if missing:
        raise FileNotFoundError(missing[0].error)
    docs = [load_document(f) for f in files]
    return corpus, docs, {d.source_path: str(Path(d.source_path).relative_to(corpus)) for d in docs}


def eval_documents(spec: EvalSpec) -> tuple[list, dict[str, str]]:
    """The corpus's parsed documents and {source path: path relative to the corpus} (what gold spans name)."""
    _, docs, rel = load_corpus(spec.corpus)
    return docs, rel


def _ingest_times(s) -> dict:
    path = s.data_dir / "eval_ingest_times.json"
    return json.loads(path.read_text()) if path.exists() else {}


def eval_collection(app, spec: EvalSpec, name: str, docs: list, need_emb: bool, progress: Progress | None = None,
                    ingest_times: dict | None = None) -> tuple[str, Any, list]:
    """(collection name, its checked CollectionInfo, [(document, its chunks)]) for one chunker: the
    collection is built the first time and reused while chunker, settings, model and corpus are unchanged."""
    s = app.settings
    ingest_times = _ingest_times(s) if ingest_times is None else ingest_times
    emb = app.embeddings() if need_emb else None
    chunker = build_chunker(name, s, emb)
    t0 = time.perf_counter()
    chunked = [(d, chunker.chunk(d)) for d in docs]
    chunk_s = time.perf_counter() - t0
    all_chunks = [c for _, cs in chunked for c in cs]
    cname = f"eval-{name}-{_fingerprint(spec, s, chunker, docs, emb.model_name if emb else '-')}"
    if app.store.info(cname) is None:
        emb = emb or app.embeddings()
        info = decide_collection(cname, chunker, emb, all_chunks, 1.0 if spec.force_dense else s.embed_max_unk_rate)
        app.store.create(info)
        t1 = time.perf_counter()
        index_documents(app.store, info, chunked, emb, progress)
        ingest_times[cname] = round(chunk_s + time.perf_counter() - t1, 2)
        (s.data_dir / "eval_ingest_times.json").write_text(json.dumps(ingest_times, indent=1))
    return cname, app.checked_collection(cname), chunked


def index_for_chunker(app, spec: EvalSpec, name: str, configs: dict[str, QueryConfig], docs: list,
                      progress: Progress | None) -> tuple[Any, dict]:
    """The chunker's own collection and what the row says of its chunks: sizes, integrity, ingest time."""
    need_emb = (name in NEEDS_EMBEDDINGS or spec.force_dense
                or any(c.retriever in ("dense", "hybrid") for c in configs.values()))
    ingest_times = _ingest_times(app.settings)
    cname, info, chunked = eval_collection(app, spec, name, docs, need_emb, progress, ingest_times)
    all_chunks = [c for _, cs in chunked for c in cs]
    return info, {"collection": cname, **_chunk_quality(chunked, all_chunks, app.settings),
                  "ingest_s": ingest_times.get(cname)}


def training_set(app, qa: Path | None, corpus: Path, split: str | None, progress: Progress | None = None):
    """What `rag train-ranker` and `rag train-adapter` learn from: the split's questions (none without a QA
    file: an adapter trained on feedback alone), the corpus's documents and their paths as the QA file names
    them, the `legal` chunker's eval collection (built as `rag eval` builds it), the levers' settings and the
    rescore embedder."""
    spec = EvalSpec(qa=qa or Path(), corpus=corpus, chunkers=["legal"], split=split)
    questions = eval_questions(spec) if qa is not None else []
    docs, rel = eval_documents(spec)
    _, info, _ = eval_collection(app, spec, "legal", docs, app.settings.retriever in ("dense", "hybrid"), progress)
    return questions, docs, rel, info, app.query_config(), app.rescorer(required=True)


def ranked_of(answer: Answer, rel: dict[str, str]) -> list[Ranked]:
    """An answer's ranking as the hit rule reads it (document paths relative to the corpus)."""
    return [Ranked(rel[h.chunk.source_path], h.chunk.char_start, h.chunk.char_end, h.chunk.token_count,
                   h.rerank_score if h.rerank_score is not None else h.score, h.chunk.text)
            for h in answer.ranked]


def run_row(run: ConfigRun, questions: list[Question], spec: EvalSpec) -> dict:
    """One configuration's figures: ranx metrics, what acted, context tokens, answers and their cost."""
    metrics, multi = score(questions, run.rankings, spec.ks)
    ctx = run.context_tokens
    return {**metrics, "rerank": run.rerank_status, "multi_gold_chunks": multi,
            "levers_acted": dict(sorted(run.levers_acted.items())), "scope": spec.scope,
            "scoped_questions": run.scoped, "answers": "llm" if spec.use_llm else "extractive",
            "mean_context_tokens": round(sum(ctx) / len(ctx), 1) if ctx else 0.0, **run.costs()}


def task_rows(run: ConfigRun, questions: list[Question], spec: EvalSpec, budgets_by_task: dict,
              label: dict) -> list[dict]:
    by_task: dict[str, list[tuple[Question, list[Ranked], bool]]] = defaultdict(list)
    for q, r, cited in zip(questions, run.rankings, run.cites_gold):
        by_task[q.task].append((q, r, cited))
    rows = []
    for task, items in sorted(by_task.items()):
        m, _ = score([q for q, _, _ in items], [r for _, r, _ in items], spec.ks)
        rows.append({**label, "task": task, "n": len(items), **m,
                     "answers_citing_gold": round(sum(c for _, _, c in items) / len(items), 4),
                     "budgets": budgets_by_task[task]})
    return rows


SCOPES = ("none", "doc")


def question_scope(q: Question, how: str) -> Scope | None:
    """`doc`: the question is searched within its own QA line's document (which must be in the corpus)."""
    if how == "none":
        return None
    if how != "doc":
        raise ConfigError(f"--scope must be one of {', '.join(SCOPES)}, not {how!r}")
    if not q.doc:
        raise ConfigError(f"question {q.id}: --scope doc needs a `doc` field on every QA line")
    return Scope(docs=(q.doc,))


def cites_gold(answer: Answer, q: Question, rel: dict[str, str]) -> bool:
    """The answer cites a passage covering one of the question's gold spans. An extractive answer
    cites the excerpt it shows of each passage; a generated one the passages its [n] marks point at
    (a mark past the passages sent, or no mark, cites nothing)."""
    spans: list[tuple[str, Any, Any]]
    if answer.mode == "extractive":
        spans = [(c.doc, c.char_start, c.char_end) for c in answer.citations]
    else:
        spans = [(sc.chunk.source_path, sc.chunk.char_start, sc.chunk.char_end)
                 for sc in marked_contexts(answer.text, answer.contexts)]
    return any(covers(rel.get(doc, doc), start, end, g) for doc, start, end in spans for g in q.gold)


def _query_cost(answer: Answer) -> int | None:
    """Nano-dollars the query would cost with its LLM call made: billed plus shadow, None when unpriced."""
    t = totals(answer.usage)
    return None if t.known_cost_nano is None or t.known_shadow_nano is None else t.cost_nano + t.shadow_nano


def score(questions: list[Question], rankings: list[list[Ranked]], ks: list[int]) -> tuple[dict, int]:
    from ranx import Qrels, Run, evaluate

    qrels, run, multi = {}, {}, 0
    for q, ranking in zip(questions, rankings):
        qrels[q.id] = qrels_for(q)
        items, m = ranking_to_run(q, ranking)
        multi += m
        run[q.id] = items or {f"{q.id}#none": 0.0}
    names = [f"recall@{k}" for k in ks] + ["mrr@10", "ndcg@10", "hit_rate@5"]
    vals = evaluate(Qrels(qrels), Run(run), names, make_comparable=True)
    return {k: round(float(v), 4) for k, v in vals.items()}, multi


def _chunk_quality(chunked, all_chunks, s) -> dict:
    sent_ok = sent_n = art_ok = art_n = 0
    for doc, cs in chunked:
        a, b = sentence_integrity(doc, cs)
        sent_ok, sent_n = sent_ok + a, sent_n + b
        a, b = article_integrity(doc, cs, s.chunk_hard_max)
        art_ok, art_n = art_ok + a, art_n + b
    return {**size_stats(all_chunks, (s.chunk_target_min, s.chunk_target_max)),
            "sentence_integrity_pct": round(100 * sent_ok / max(sent_n, 1), 1),
            "article_integrity_pct": round(100 * art_ok / art_n, 1) if art_n else None}
