"""One query's spans (as a receiver decoded them: name, trace_id, span_id, parent_id, start_ns, end_ns,
status_code 0 unset / 2 error, flat attributes) against its ledger rows. Shared by the local-receiver
tests and the Arize Phoenix test, so both hold the export to the same standard."""
from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

import pytest

from tracing.observe import span_id_for, trace_id_for


def index_one_small_law(root):
    """A BM25 collection of one small real law under `root` (the traced queries' corpus)."""
    import shutil

    from rag_app.app import RagApp
    from tests.conftest import LAWS, SMALL_LAWS, make_settings

    corpus = root / "corpus"
    for rel in SMALL_LAWS[:1]:
        (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(LAWS / rel, corpus / rel)
    with RagApp(make_settings(root, retriever="bm25")) as app:
        assert not app.ingest([corpus]).errors
    return root


def ledger(settings, query_id: str) -> tuple[dict, list[dict]]:
    conn = sqlite3.connect(settings.ledger_path)
    conn.row_factory = sqlite3.Row
    query = dict(conn.execute("SELECT * FROM queries WHERE query_id = ?", (query_id,)).fetchone())
    rows = [dict(r) for r in conn.execute("SELECT * FROM stage_calls WHERE query_id = ? ORDER BY id", (query_id,))]
    conn.close()
    return query, rows


def ns(iso: str) -> int:
    d = datetime.fromisoformat(iso) - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (d.days * 86_400 + d.seconds) * 10**9 + d.microseconds * 1000


def check_trace_equals_ledger(spans: list[dict], query: dict, rows: list[dict], tol_ns: int = 1000) -> dict:
    """The span tree of one query against its ledger rows; returns the spans by role."""
    qid = query["query_id"]
    tid = f"{trace_id_for(qid):032x}"
    mine = [s for s in spans if s["trace_id"] == tid]
    roots = [s for s in mine if s["parent_id"] is None]
    assert len(roots) == 1, [s["name"] for s in roots]
    root = roots[0]
    assert root["span_id"] == f"{span_id_for(qid, 'query'):016x}"
    a = root["attributes"]
    assert (a["rag.query_id"], a["rag.status"], a.get("rag.mode")) == (qid, query["status"], query["mode"])
    assert root["start_ns"] == ns(query["started_at"])
    costs = [r["cost_nano_usd"] for r in rows]
    assert a["rag.cost.priced_nano_usd"] == sum(c for c in costs if c is not None)
    if None in costs:
        assert "rag.cost.nano_usd" not in a and a["rag.cost.unpriced_rows"] >= 1
    else:
        assert a["rag.cost.nano_usd"] == sum(costs)
    assert a["rag.usage.input_tokens"] == sum(r["input_tokens"] for r in rows)

    under_root = [s for s in mine if s["parent_id"] == root["span_id"]]
    attempts = [r for r in rows if r["attempt_id"]]
    others = [r for r in rows if not r["attempt_id"]]
    assert sorted(s["name"] for s in under_root) == sorted([r["stage"] for r in others]
                                                           + ["generate"] * len({r["call_id"] for r in attempts}))
    for r in others:
        (s,) = [s for s in under_root if s["name"] == r["stage"] and s["start_ns"] == ns(r["started_at"])]
        sa = s["attributes"]
        assert (sa["rag.stage"], sa["rag.status"]) == (r["stage"], r["status"])
        assert (sa["rag.usage.input_tokens"], sa["rag.usage.output_tokens"]) == (r["input_tokens"], r["output_tokens"])
        assert sa.get("rag.cost.nano_usd") == r["cost_nano_usd"]
        assert sa.get("rag.shadow_cost.nano_usd") == r["shadow_cost_nano_usd"]
        assert sa.get("rag.price.version") == r["price_version"]
    out = {"root": root, "stages": under_root, "attempts": []}
    if attempts:
        (gen,) = [s for s in under_root if s["name"] == "generate" and s["attributes"].get("rag.attempts")]
        assert gen["attributes"]["rag.attempts"] == len(attempts)
        children = sorted((s for s in mine if s["parent_id"] == gen["span_id"]),
                          key=lambda s: s["attributes"]["rag.attempt"])
        assert len(children) == len(attempts)
        for s, r in zip(children, sorted(attempts, key=lambda r: r["attempt"])):
            sa = s["attributes"]
            assert s["name"] == f"chat {r['model']}"
            assert (sa["rag.attempt"], sa["rag.status"], sa["rag.possibly_billed"]) == (
                r["attempt"], r["status"], bool(r["possibly_billed"]))
            assert sa["gen_ai.request.model"] == sa["llm.model_name"] == r["model"]
            assert sa["gen_ai.usage.input_tokens"] == sa["llm.token_count.prompt"] == r["input_tokens"]
            assert sa["gen_ai.usage.output_tokens"] == sa["llm.token_count.completion"] == r["output_tokens"]
            assert sa.get("gen_ai.usage.cache_read.input_tokens", 0) == r["cached_tokens"]
            assert sa.get("gen_ai.usage.reasoning.output_tokens", 0) == r["reasoning_tokens"]
            assert sa.get("rag.cost.nano_usd") == r["cost_nano_usd"]
            assert sa["rag.cost.unpriced"] == (r["cost_nano_usd"] is None)
            assert (sa["rag.price.version"], sa["rag.price.source"]) == (r["price_version"], r["price_source"])
            assert s["start_ns"] == ns(r["started_at"])
            assert s["end_ns"] - s["start_ns"] == pytest.approx(r["latency_ms"] * 1e6, abs=tol_ns)
            failed = r["status"] in ("retry", "timeout", "error")
            assert s["status_code"] == (2 if failed else 0)  # STATUS_CODE_ERROR / UNSET
            assert ("error.type" in sa) == failed
        out["generate"], out["attempts"] = gen, children
    return out
