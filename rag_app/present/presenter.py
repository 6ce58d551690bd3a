"""One answer payload for every front door: `rag ask --json`, `rag ask`'s tables, `rag demo` and
`POST /v1/ask` show the same fields and the same totals, computed from the usages the answer carries
(the values the ledger rows were written from), never from reading the ledger back.

It shows what the answer already holds: each citation names where it lies (`Citation.label`, made with
the citation) and each passage comes with its citation (`Answer.passages`); a stage is shown as its ledger
row by the function the front door hands in (`stage_view`: tracing.ledger.usage_json). So this module
imports neither the query path nor the ledger."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rag_app.core import usd_json
from rag_app.core import Answer, Citation, ScoredChunk
from rag_app.core import StageUsage, totals
from rag_app.quality import quality_of

# a priced usage and its query's id -> the stage as the ledger's reports show it (tracing.ledger.usage_json)
StageView = Callable[[StageUsage, str], dict]


def answer_payload(answer: Answer, *, stage_view: StageView, doc_path: Callable[[str], str] = str) -> dict:
    """`doc_path`: how a citation's source file is shown (the service shows it relative to its data dir)."""
    t = totals(answer.usage)
    return {"query_id": answer.query_id, "question": answer.question, "answer": answer.text, "mode": answer.mode,
            "incomplete": answer.incomplete,
            "citations": [{**c.as_dict(), "doc": doc_path(c.doc)} for c in answer.citations],
            "passages": [passage_json(i, sc, cite, doc_path)
                         for i, (sc, cite) in enumerate(zip(answer.contexts, answer.passages, strict=True), 1)],
            "levers": list(answer.levers),
            "scope": ({"docs": list(answer.scope.labels), "how": answer.scope.how} if answer.scope else None),
            "stages": [stage_view(u, answer.query_id) for u in answer.usage],
            # null when a row is unpriced, as the ledger's per-query totals; the priced part is apart
            "total_cost_usd": usd_json(t.known_cost_nano), "total_shadow_cost_usd": usd_json(t.known_shadow_nano),
            "priced_cost_usd": usd_json(t.cost_nano), "priced_shadow_cost_usd": usd_json(t.shadow_nano),
            "unpriced": t.unpriced, "unpriced_rows": t.unpriced_rows,
            "quality": (answer.quality or quality_of(answer)).as_json()}


def passage_json(n: int, sc: ScoredChunk, cite: Citation, doc_path: Callable[[str], str] = str) -> dict:
    """A passage sent to the model (`[n]` in its prompt), whole, with the citation of its whole range."""
    return {"n": n, **cite.as_dict(), "doc": doc_path(sc.chunk.source_path), "text": sc.chunk.text,
            "tokens": sc.chunk.token_count, "score": sc.score, "rerank_score": sc.rerank_score,
            "linked_from": sc.linked_from}


def citation_label(c: dict) -> str:
    """One line per citation for people: `《公司法》第二十条` / `NON-DISCLOSURE AGREEMENT §10`, file, characters."""
    span = f" chars {c['char_start']}-{c['char_end']}" if c.get("char_start") is not None else ""
    return f"{c['label']}  {c['doc']}{span}"


def display_path(path: str, data_dir: Path) -> str:
    """A stored source path as users may see it: relative to the data dir or the working dir, else
    just the file name; never the server's absolute layout."""
    p = Path(path)
    for root in (data_dir, Path.cwd()):
        try:
            return str(p.relative_to(root.resolve()))
        except ValueError:
            continue
    return p.name
