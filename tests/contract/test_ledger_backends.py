"""One contract for the ledger, run against each backend (`ledger_url`: a SQLite file, then a throwaway
PostgreSQL database): the same migrations build the same schema, the writer keeps the same rows, and
every reader (reports, audit, re-pricing, experiment compare, the HTTP API) gives identical results.

Each test asserts figures worked out by hand, and compares what PostgreSQL gives with what a SQLite
ledger written with the same rows gives, field by field."""
from __future__ import annotations

import csv
import io
import json
import threading
from datetime import date

import httpx
import pytest
import sqlalchemy as sa

from rag_app.experiments.comparison import compare_live
from rag_app.experiments.variants import Experiment
from rag_app.config.ledger_location import as_target
from tests.conftest import index_company_law, make_settings
from tests.unit.tracing.ledger.test_ledger_schema import (
    EXPECTED_QUERIES,
    EXPECTED_REPRICINGS,
    EXPECTED_SHADOW_PAIRS,
    EXPECTED_STAGE_CALLS,
)
from tracing.ledger import BY_DIMS, MIGRATIONS, Ledger, LedgerWriter, url_for_path
from tracing.ledger.schema import metadata
from tracing.pricing import PriceTable
from tracing.pricing import reprice

BIG = 3_000_000_000_000  # $3,000 in nano-dollars: past int4, as a busy month's total is
EXP = Experiment("e", "a", "b", 50, "s")
T0 = "2026-11-30T10:00:00.000+00:00"


def _t(i: int) -> str:
    return f"2026-11-30T10:{i // 60:02d}:{i % 60:02d}.000+00:00"


def write_scenario(url: str, spill_dir) -> LedgerWriter:
    """Rows every reader has to get right: two arms of a live experiment, an unpriced model, a retry
    and a timeout, estimates, cache hits, an LLM attempt written `started` then replaced, one left
    `started` (unknown), an orphan stage row, a shadow pair, and rows the ledger must reject."""
    w = LedgerWriter(url, batch=7, spill_dir=spill_dir)
    for i in range(12):
        variant, arm = ("a", "control") if i % 2 == 0 else ("b", "treatment")
        qid = f"q{i:02d}"
        w.put("queries", {"query_id": qid, "kind": "query", "question": f"问题 {i} 100% ?", "variant": variant,
                          "experiment": "e", "mode": "llm", "status": "ok" if i != 5 else "error",
                          "started_at": _t(i), "ended_at": _t(i + 1), "latency_ms": 100.25 + i, "user_id": f"u{i}",
                          "arm": arm, "sticky": True, "origin": "live"})
        w.put("stage_calls", {"query_id": qid, "stage": "embed_query", "status": "ok", "model": "bge",
                              "input_tokens": 20, "cost_nano_usd": 400, "price_source": "rate", "cache_hits": i % 3,
                              "cache_misses": 1, "usage_source": "local", "started_at": _t(i), "variant": variant,
                              "experiment": "e", "latency_ms": 1.5})
        w.put("stage_calls", {"query_id": qid, "stage": "retrieve", "status": "ok", "started_at": _t(i), "cost_nano_usd": 0,
                              "variant": variant, "experiment": "e", "latency_ms": 3.0})
        model = "gpt-4o-mini" if i != 7 else "house-llm-7b"
        cost = None if model == "house-llm-7b" else (BIG if i == 0 else 150_000 + 1000 * i)
        gen = {"query_id": qid, "stage": "generate", "status": "ok", "model": model, "provider": "openai",
               "input_tokens": 1000 + i, "output_tokens": 50 + i, "cached_tokens": 10 * (i % 2),
               "reasoning_tokens": i % 4, "cost_nano_usd": cost,
               "price_source": "unpriced" if cost is None else "genai-prices", "price_version": "v1",
               "usage_source": "provider" if i % 3 else "estimated:o200k_base", "usage_raw": json.dumps({"i": i}),
               "possibly_billed": False, "started_at": _t(i), "variant": variant, "experiment": "e",
               "latency_ms": 800.5, "call_id": f"c{i}", "attempt": 1, "context_tokens": 900 + i,
               "context_budget_tokens": 1000, "attempt_id": f"att-{i}"}
        if i == 3:  # one retry, then the answer
            w.put("stage_calls", {**gen, "status": "retry", "cost_nano_usd": 70_000, "error": "HTTP 429",
                                  "attempt_id": "att-3-retry"})
            gen["attempt"] = 2
        if i == 4:  # written before the request left, replaced when it ended
            assert w.write_now("stage_calls", {**gen, "status": "started", "output_tokens": 0, "possibly_billed": True})
        if i == 9:
            w.put("stage_calls", {**gen, "status": "timeout", "possibly_billed": True, "attempt_id": "att-9-t",
                                  "output_at_risk_tokens": 512})
            gen["attempt"] = 2
        w.put("stage_calls", gen)
    # an attempt that never ended (the process died): stays `started`, reported as unknown
    w.write_now("stage_calls", {"query_id": "q11", "stage": "generate", "status": "started", "model": "gpt-4o-mini",
                                "input_tokens": 999, "cost_nano_usd": 150_000, "price_source": "genai-prices",
                                "possibly_billed": True, "started_at": _t(11), "attempt_id": "att-dead"})
    w.put("stage_calls", {"query_id": "ghost", "stage": "generate", "status": "ok", "cost_nano_usd": 5,
                          "started_at": _t(30)})  # orphan: its query row never came
    w.put("queries", {"query_id": "i0", "kind": "ingest", "status": "ok", "started_at": _t(40)})
    w.put("shadow_pairs", {"control_query_id": "q00", "treatment_query_id": "q01", "experiment": "e",
                           "topk_jaccard": 0.5, "top3_overlap": 2 / 3, "answer_similarity": 0.25, "created_at": T0})
    w.put("shadow_pairs", {"control_query_id": "q00", "treatment_query_id": "q03", "experiment": "e",
                           "topk_jaccard": 0.75, "top3_overlap": 1.0, "answer_similarity": 0.5, "created_at": T0})
    # rows the ledger rejects: kept in quarantine, never lose the batch around them
    w.put("stage_calls", {"query_id": "bad1", "stage": "x", "status": "ok", "started_at": T0, "no_such_column": 1})
    w.put("stage_calls", {"query_id": "bad2", "stage": "x"})  # NOT NULL status, started_at
    w.put("stage_calls", {"query_id": "bad3", "stage": "x", "status": "ok", "started_at": T0,
                          "input_tokens": {"not": "an int"}})
    assert w.flush(30), w.health()
    return w


def _budget_steps(tx) -> list:
    steps = [tx.spend("user", "u3", _t(0)), tx.spend("user", "nobody", _t(0)), tx.estimate("variant", "a"),
             tx.estimate("variant", "b"), tx.estimate("variant", "zzz"), tx.estimate("user", "u1", "gpt-4o-mini"),
             tx.estimate("user", "u1", "no-such-model"), tx.estimate("evaluation", "*"),
             tx.spend("evaluation", "*", _t(0)), tx.in_flight("user", "u1", _t(0))]
    tx.reserve("r1", "k1", "u1", "a", 500, _t(50))
    tx.reserve("q02", None, "u2", "a", 7, _t(50))  # q02's row has landed: nothing of it is in flight
    tx.reserve("judge:q77", None, None, "a", 11, _t(50))  # a grading: evaluation's, never the variant's queries
    steps += [tx.in_flight("user", "u1", _t(0)), tx.in_flight("user", "u2", _t(0)), tx.in_flight("variant", "a", _t(0)),
              tx.in_flight("key", "k1", _t(0)), tx.in_flight("user", "u1", _t(51)), tx.in_flight("evaluation", "*", _t(0)),
              tx.in_flight("evaluation", "a", _t(0)), tx.last_event_at("user=* day", "u1", "hard")]
    tx.add_event({"at": _t(50), "budget": "user=* day", "dim": "user", "value": "u1", "kind": "hard",
                  "period_start": T0, "spend_nano_usd": BIG, "limit_nano_usd": 5 * 10**9, "unpriced_calls": 0,
                  "webhook": "pending"})
    steps.append(tx.last_event_at("user=* day", "u1", "hard"))
    steps += [tx.headroom("user", "u1", _t(0), _t(0)), tx.headroom("user", "u3", _t(0), _t(51))]  # one statement
    steps += [tx.last_event("user=* day", "u1", "hard"), tx.last_event("user=* day", "u1", "digest")]
    return steps


def sql(ledger: Ledger, text: str, **params) -> list[dict]:
    """The test's own look at the tables (the product reads only through the repository)."""
    with ledger.engine.connect() as db:
        return [dict(r) for r in db.execute(sa.text(text), params).mappings()]


def _no_ids(rows):
    # ids come from a sequence on PostgreSQL: a quarantined insert still used one up
    return [{k: v for k, v in r.items() if k not in ("id", "stage_call_id")} for r in rows]


def snapshot(url: str) -> dict:
    """What every repository method says about the ledger, minus wall-clock stamps."""
    with Ledger.open(url) as L:
        arm = L.arm("e", "b", "live")
        out = {
            "report": vars(L.report()),
            "report_last3_b": vars(L.report(last=3, variant="b")),
            "report_full": vars(L.report_full()),
            "report_totals_last5": L.report_totals(last=5),
            "audit": L.audit(),
            "stage_rows_q03": _no_ids(L.stage_rows("q03")),
            "query_q07": L.query("q07"), "query_none": L.query("nope"),
            "lists": [L.list_queries(), L.list_queries(variant="b", limit=2, offset=1),
                      L.list_queries(status="error"), L.list_queries(since=_t(5), until=_t(9)),
                      L.list_queries(experiment="e", limit=3)],
            "iter": list(L.iter_query_rows()), "iter_raw_b": list(L.iter_query_rows(variant="b", last=4, raw=True)),
            "arm": (arm.sums, arm.tokens, arm.latency_nulls, arm.percentile("latency_ms", 6, 0.5),
                    arm.percentile("cost_nano_usd", 6, 0.95, nulls_as_zero=1)),
            "query_costs": L.query_costs(["q00", "q07", "q11", "nope"]),
            "mean_output_tokens": L.mean_output_tokens("gpt-4o-mini"),
            "compare": compare_live(L, EXP, today=date(2026, 12, 1), over_time="hour"),  # with its timeline
            "unpriced_models": L.unpriced_models(PriceTable.load(None)),
            "unpriced_rows_now": L.unpriced_rows_now(),
            "candidates": sorted(_no_ids(L.reprice_candidates(since=_t(3), model="gpt-4o-mini")),
                                 key=lambda r: json.dumps(r, sort_keys=True)),  # ids follow commit order
            "shadow_pairs": sql(L, "SELECT * FROM shadow_pairs ORDER BY control_query_id"),
            "quarantine": [(r["target_table"], json.loads(r["row_json"])["query_id"]) for r in sql(
                L, "SELECT target_table, row_json FROM ledger_quarantine ORDER BY id")],
        }
        move = {"experiment": "e", "seq": 1, "at": _t(6), "action": "advance", "from_pct": 10.0, "to_pct": 50.0,
                "reason": "r", "decided_by": None, "control_queries": 3, "treatment_queries": 2, "srm_pvalue": 0.5,
                "writer_id": "w"}
        out["ramp"] = (L.add_experiment_event(move), L.add_experiment_event(move),  # the second: seq taken
                       _no_ids(L.experiment_events("e")), L.step_counts("e", None), L.step_counts("e", _t(5)))
        assert out["ramp"][:2] == (True, False) and out["ramp"][3], out["ramp"]
        # budgets (#23): spend per key, user, variant; in-flight reservations; events (before re-pricing)
        out["budget_spend"] = {d: L.budget_spend(d, _t(0)) for d in ("key", "user", "variant")}
        out["budget_spend_u7_since"] = (L.budget_spend("user", _t(6), "u7"), L.budget_spend("user", _t(8), "u7"))
        out["budget_tx"] = L.budget_tx(_budget_steps)
        out["budget_events"] = L.budget_events(_t(0))
        out["budget_pruned"] = (L.prune_budget_reservations(_t(50)), L.prune_budget_reservations(_t(51)))
        out["by"] = {dim: L.by(dim) for dim in BY_DIMS}  # the rollups, read on each engine
        out["by_b"] = {dim: L.by(dim, variant="b") for dim in BY_DIMS}
        assert all(out["by"].values()), out["by"]
        res = reprice(L, PriceTable.load(None))
        out["reprice"] = (res.rows, res.changed, res.old_nano, res.new_nano, res.unpriced_before, res.unpriced_after)
        out["repriced_rows"] = (L.repriced_rows(), L.repriced_rows(["q00", "q01"]))
        out["report_repriced"] = vars(L.report(prices="repriced"))
        arm = L.arm("e", "b", "live")  # re-priced figures, read from the rows on each engine
        out["arm_repriced"] = (arm.repriced_rows, arm.sums, arm.percentile("cost_nano_usd", 6, 0.5))
        out["compare_repriced"] = compare_live(L, EXP)
        assert arm.repriced_rows and out["compare_repriced"]["prices"] == "repriced", "seed re-priced rows in arm b"
        out["rebuilt"] = L.rebuild_totals()
        out["report_after_rebuild"] = vars(L.report())
        return out


@pytest.fixture
def sqlite_reference(tmp_path_factory) -> dict:
    ref = tmp_path_factory.mktemp("ref")
    url = url_for_path(ref / "ledger.sqlite")
    write_scenario(url, ref / "spill").close()
    return snapshot(url)


def columns(ledger: Ledger, table: str) -> list[str]:
    return [c["name"] for c in sa.inspect(ledger.engine).get_columns(table)]


def test_migrations_build_the_same_schema(ledger_url):
    with Ledger.open(ledger_url) as L:
        assert columns(L, "stage_calls") == list(EXPECTED_STAGE_CALLS)
        assert columns(L, "queries") == list(EXPECTED_QUERIES)
        assert columns(L, "shadow_pairs") == list(EXPECTED_SHADOW_PAIRS)
        assert columns(L, "repricings") == list(EXPECTED_REPRICINGS)
        insp = sa.inspect(L.engine)
        assert {"query_costs", "query_costs_repriced", "stage_calls_repriced"} <= set(insp.get_view_names())
        assert {t.name for t in metadata.sorted_tables} <= set(insp.get_table_names())
        names = [r["name"] for r in sql(L, "SELECT name FROM _migrations ORDER BY name")]
        assert names == sorted(m.__name__ for m in MIGRATIONS)
        if L.target.dialect == "postgresql":  # money columns hold more than $2.14 (int4's nano-dollar limit)
            types = {c["name"]: str(c["type"]) for c in insp.get_columns("stage_calls")}
            assert types["cost_nano_usd"] == "BIGINT" and types["latency_ms"] == "DOUBLE PRECISION"
            assert types["id"] == "BIGINT"
    with Ledger.open(ledger_url) as again:  # idempotent: a second start applies nothing
        assert sql(again, "SELECT COUNT(*) AS n FROM _migrations") == [{"n": len(MIGRATIONS)}]


def test_processes_starting_together_migrate_once(ledger_url):
    """Replicas that start at the same moment on an empty ledger: every one gets a migrated ledger
    and each migration is recorded once (BEGIN IMMEDIATE on SQLite, an advisory lock on PostgreSQL)."""
    errors, barrier = [], threading.Barrier(6)

    def start():
        try:
            barrier.wait(10)
            Ledger.open(ledger_url).close()
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=start) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    with Ledger.open(ledger_url) as L:
        names = [r["name"] for r in sql(L, "SELECT name FROM _migrations")]
    assert sorted(names) == sorted(m.__name__ for m in MIGRATIONS)


def test_writer_keeps_every_row_and_quarantines_bad_ones(ledger_url, tmp_path):
    w = write_scenario(ledger_url, tmp_path / "spill")
    h = w.health()
    w.close()
    # writes: 13 queries; 36 stage rows + retry + timeout + `started` (then replaced) + unknown + orphan;
    # 2 shadow pairs (the second replaces the first)
    assert (h["written_rows"], h["quarantined_rows"], h["lost_rows"], h["status"]) == (13 + 41 + 2, 3, 0, "ok")
    with Ledger.open(ledger_url) as L:
        counts = {t: sql(L, f"SELECT COUNT(*) AS n FROM {t}")[0]["n"]
                  for t in ("queries", "stage_calls", "shadow_pairs", "ledger_quarantine")}
        assert counts == {"queries": 13, "stage_calls": 40, "shadow_pairs": 1, "ledger_quarantine": 3}
        # the `started` row was replaced in place by the attempt's final row
        att = sql(L, "SELECT status, output_tokens, possibly_billed FROM stage_calls WHERE attempt_id = :a", a="att-4")
        assert att == [{"status": "ok", "output_tokens": 54, "possibly_billed": 0}]
        assert sql(L, "SELECT cost_nano_usd FROM stage_calls WHERE query_id = 'q00' AND stage = 'generate'"
                   ) == [{"cost_nano_usd": BIG}]
        assert sql(L, "SELECT cost_nano_usd, priced_cost_nano_usd FROM query_costs WHERE query_id = 'q07'"
                   ) == [{"cost_nano_usd": None, "priced_cost_nano_usd": 400}]
        # the repository's totals agree with the view over the raw rows, typed alike on both engines
        q00 = L.query("q00")
        assert q00["cost_nano_usd"] == BIG + 400 and q00["question"] == "问题 0 100% ?"
        assert type(q00["latency_ms"]) is float and type(q00["input_tokens"]) is int
        assert L.query_costs(["q00", "q07"]) == {"q00": (BIG + 400, q00["shadow_cost_nano_usd"]),
                                                 "q07": (None, L.query("q07")["shadow_cost_nano_usd"])}


def test_a_repeated_upsert_keeps_the_same_row_on_both_engines(ledger_url, tmp_path):
    """0.4.0's SQLite replaced the whole query row (error and origin became NULL) where PostgreSQL merged
    the named columns. A query row is written whole at the query's end, so a second write of it now
    replaces it on both engines; an LLM attempt's final row updates the `started` row's named columns."""
    w = LedgerWriter(ledger_url, spill_dir=tmp_path / "spill")
    w.put("queries", {"query_id": "q1", "kind": "query", "status": "error", "error": "boom", "origin": "live",
                      "started_at": T0, "latency_ms": 5.0})
    assert w.flush(30)
    w.put("queries", {"query_id": "q1", "kind": "query", "status": "ok", "started_at": T0, "latency_ms": 7.5})
    w.put("stage_calls", {"query_id": "q1", "stage": "generate", "status": "started", "attempt_id": "a1",
                          "started_at": T0, "possibly_billed": True, "input_tokens": 10})
    assert w.flush(30)
    w.put("stage_calls", {"query_id": "q1", "stage": "generate", "status": "ok", "attempt_id": "a1",
                          "started_at": T0, "possibly_billed": False, "output_tokens": 3, "cost_nano_usd": 9})
    assert w.flush(30)
    w.close()
    with Ledger.open(ledger_url) as L:
        assert sql(L, "SELECT status, error, origin, latency_ms FROM queries") == [
            {"status": "ok", "error": None, "origin": None, "latency_ms": 7.5}]
        assert sql(L, "SELECT status, input_tokens, output_tokens, cost_nano_usd, possibly_billed FROM stage_calls"
                   ) == [{"status": "ok", "input_tokens": 10, "output_tokens": 3, "cost_nano_usd": 9,
                          "possibly_billed": 0}]
        q = L.query("q1")
        assert (q["status"], q["cost_nano_usd"], q["latency_ms"], q["stage_rows"]) == ("ok", 9, 7.5, 1)
        assert L.report().totals["queries"] == 1 and L.list_queries(status="error") == (0, [])


def test_every_reader_gives_identical_results(ledger_url, sqlite_reference, tmp_path):
    write_scenario(ledger_url, tmp_path / "spill").close()
    snap = snapshot(ledger_url)
    t = snap["report"]["totals"]
    assert t["queries"] == 12 and t["unpriced_queries"] == 1 and t["retries"] == 1 and t["timeouts"] == 1
    gen = sum(150_000 + 1000 * i for i in range(1, 12) if i != 7) + BIG + 70_000 + 159_000  # + retry + timeout
    assert t["cost_usd"] == pytest.approx((gen + 12 * 400) / 1e9)
    assert snap["audit"]["orphan_queries"] == 1 and snap["audit"]["unknown_attempts"] == 1
    assert snap["audit"]["quarantined_rows"] == 3
    assert snap["compare"]["arms"]["control"]["queries"] == 6 and snap["compare"]["arms"]["treatment"]["queries"] == 6
    assert [m["model"] for m in snap["unpriced_models"]] == ["house-llm-7b"]
    assert snap["quarantine"] == [("stage_calls", "bad1"), ("stage_calls", "bad2"), ("stage_calls", "bad3")]
    spend = snap["budget_spend"]
    assert spend["key"] == {} and spend["user"]["u3"] == {"priced_nano_usd": 70_000 + 153_000 + 400,
                                                          "unpriced_calls": 0, "queries": 1}
    assert spend["user"]["u7"] == {"priced_nano_usd": 400, "unpriced_calls": 1, "queries": 1}  # unknown, not $0
    assert spend["user"]["u0"]["priced_nano_usd"] == BIG + 400  # past int4
    assert spend["variant"]["a"]["queries"] == 6 and spend["variant"]["b"]["unpriced_calls"] == 1
    assert snap["budget_spend_u7_since"] == ({"u7": spend["user"]["u7"]}, {})
    steps = snap["budget_tx"]
    assert steps[0] == spend["user"]["u3"] and steps[1] == {"priced_nano_usd": 0, "unpriced_calls": 0, "queries": 0}
    assert steps[4] == 0 and steps[9] == (0, 0)  # no history: no estimate; nothing reserved yet
    # a user's latest live queries on the model it will call (u1's one query, $0.0001514); none on another model
    assert steps[5] == 151_400 and steps[6] == 0 and steps[7] == 0
    assert steps[8] == {"priced_nano_usd": 0, "unpriced_calls": 0, "queries": 0}  # no grading yet
    # the grading's reservation is evaluation's (pooled, and its graded variant's), never variant a's queries'
    assert steps[10:17] == [(1, 500), (0, 0), (1, 500), (1, 500), (0, 0), (1, 11), (1, 11)] and steps[17] is None
    assert steps[18] == _t(50) and snap["budget_events"][0]["spend_nano_usd"] == BIG
    assert steps[19] == (spend["user"]["u1"], 1, 500) and steps[20] == (spend["user"]["u3"], 0, 0)
    assert steps[21:] == [{"at": _t(50), "webhook": "pending"}, None]
    assert snap["budget_pruned"] == (0, 3)  # made at _t(50): kept by a cut at _t(50), dropped by one at _t(51)
    assert snap == sqlite_reference


def test_http_api_gives_identical_results(ledger_url, tmp_path):
    """The service's endpoints and the dashboard's data over a real socket, ledger by RAG_LEDGER_URL."""
    from tests.integration.test_service import Server

    cfg = tmp_path / "exp.json"
    cfg.write_text(json.dumps({"variants": {"a": {}, "b": {"top_n": 1}}, "experiments": {
        "e": {"control": "a", "treatment": "b", "rollout_pct": 50, "seed": "s"}}}))
    answers = {}
    for name, url in (("ref", url_for_path(tmp_path / "ref.sqlite")), ("under_test", ledger_url)):
        write_scenario(url, tmp_path / f"spill-{name}").close()
        score_answers(url)
        settings = make_settings(tmp_path, data_dir=tmp_path / f"data-{name}", ledger_url=url, experiments_file=cfg,
                                 ledger_spill_dir=tmp_path / "spill")
        assert settings.ledger == as_target(url)
        with Server(settings) as base:
            got = {}
            for path in ("/v1/queries", "/v1/queries?variant=b&limit=2&offset=1", "/v1/queries?since=2026-11-30T10:00:05",
                         "/v1/queries/q07", "/v1/reports/summary", "/v1/reports/summary?last=4",
                         "/v1/reports/queries?last=5", "/v1/reports/by?dim=user", "/v1/reports/by?dim=model",
                         "/v1/reports/by?dim=day", "/v1/experiments/e", "/v1/queries/nope", *QUALITY_FILTERS,
                         "/v1/queries?unsupported=true&format=csv", "/v1/experiments/e?over_time=auto"):
                r = httpx.get(base + path, timeout=30)
                got[path] = (r.status_code, r.text if "csv" in path else r.json())
            assert httpx.get(base + "/dashboard", timeout=30).status_code == 200
        answers[name] = got
    got = answers["under_test"]
    assert got["/v1/queries"][1]["total"] == 12 and got["/v1/queries/nope"][0] == 404
    assert got["/v1/queries/q07"][1]["cost_usd"] is None and got["/v1/queries/q07"][1]["unpriced_rows"] == 1
    assert got["/v1/reports/summary"][1]["ledger"]["unknown_attempts"] == 1
    assert got["/v1/reports/by?dim=user"][0] == 200 and got["/v1/reports/by?dim=user"][1]
    listed = {q["query_id"]: q for q in got["/v1/queries"][1]["queries"]}
    assert (listed["q04"]["groundedness"], listed["q04"]["invalid_citations"], listed["q04"]["refusal"]) == (0.25, 1, None)
    assert listed["q09"]["refusal"] is True and listed["q09"]["groundedness"] is None
    assert (listed["q02"]["feedback_down"], listed["q02"]["feedback_up"]) == (1, 1)
    assert listed["q11"]["groundedness"] is None and listed["q11"]["feedback_down"] == 0  # nothing recorded: null
    ids = {path: [q["query_id"] for q in got[path][1]["queries"]] for path in QUALITY_FILTERS}
    assert ids == {"/v1/queries?unsupported=true": ["q06", "q04", "q02"],
                   "/v1/queries?marked_wrong=true": ["q02"],
                   "/v1/queries?refusal=true": ["q09"],
                   "/v1/queries?invalid_citations=true": ["q04"],
                   "/v1/queries?grounded_below=0.5": ["q04"],
                   "/v1/queries?unsupported=true&user=u6": ["q06"],
                   "/v1/queries?unsupported=true&key=nobody": []}, ids
    assert got["/v1/queries?unsupported=true"][1]["total"] == 3
    rows = list(csv.DictReader(io.StringIO(got["/v1/queries?unsupported=true&format=csv"][1])))
    assert [r["query_id"] for r in rows] == ids["/v1/queries?unsupported=true"]
    assert list(rows[0]) == list(got["/v1/queries"][1]["queries"][0])  # the list's own columns
    assert got["/v1/experiments/e?over_time=auto"][1]["over_time"]["every"] == "hour"
    assert got == answers["ref"]


QUALITY_FILTERS = ("/v1/queries?unsupported=true", "/v1/queries?marked_wrong=true", "/v1/queries?refusal=true",
                   "/v1/queries?invalid_citations=true", "/v1/queries?grounded_below=0.5",
                   "/v1/queries?unsupported=true&user=u6", "/v1/queries?unsupported=true&key=nobody")


def score_answers(url: str) -> None:
    """Quality beside the scenario's costs: q02, q04, q06 grounded below 1 (q04 with an invalid citation), q09
    a refusal (groundedness null), q08 fully grounded, q11 never scored; users said q02 wrong and right."""
    w = LedgerWriter(url)
    for qid, grounded, invalid, refusal in (("q02", 0.75, 0, None), ("q04", 0.25, 1, None), ("q06", 0.5, 0, None),
                                            ("q08", 1.0, 0, None), ("q09", None, 0, 1)):
        for metric, value in (("groundedness", grounded), ("invalid_citations", invalid), ("refusal", refusal)):
            if metric != "refusal" or value is not None:
                w.put("query_quality", {"query_id": qid, "metric": metric, "source": "local", "value": value,
                                        "recorded_at": _t(20)})
    assert w.flush(30)
    w.close()
    with Ledger.open(url) as L:
        L.add_feedback("q02", "u2", -1, "wrong article", _t(21))
        L.add_feedback("q02", "u9", 1, None, _t(22))


def test_cli_readers_give_identical_results(ledger_url, tmp_path, monkeypatch):
    """`rag report`, `rag experiment compare`, `rag prices check` and `rag reprice`, ledger by RAG_LEDGER_URL."""
    from typer.testing import CliRunner

    from rag_app.cli.main import app

    cfg = tmp_path / "exp.json"
    cfg.write_text(json.dumps({"variants": {"a": {}, "b": {"top_n": 1}}, "experiments": {
        "e": {"control": "a", "treatment": "b", "rollout_pct": 50, "seed": "s"}}}))
    monkeypatch.setenv("RAG_EXPERIMENTS_FILE", str(cfg))
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    outputs = {}
    for name, url in (("ref", url_for_path(tmp_path / "ref.sqlite")), ("under_test", ledger_url)):
        write_scenario(url, tmp_path / f"spill-{name}").close()
        monkeypatch.setenv("RAG_LEDGER_URL", url)
        got = {}
        for args in (["report", "--format", "json"], ["report", "--last", "4", "--format", "csv"],
                     ["experiment", "compare", "e", "--json"], ["prices", "check", "--json"],
                     ["reprice"], ["report", "--prices", "repriced", "--format", "json"]):
            res = CliRunner().invoke(app, args)
            got[" ".join(args)] = (res.exit_code, res.output.replace(url, "URL"))
        outputs[name] = got
    got = outputs["under_test"]
    rep = json.loads(got["report --format json"][1])
    assert got["report --format json"][0] == 0 and rep["totals"]["queries"] == 12
    assert rep["ledger"]["orphan_queries"] == 1 and rep["ledger"]["migrations_pending"] == []
    assert json.loads(got["experiment compare e --json"][1])["arms"]["treatment"]["queries"] == 6
    assert got["prices check --json"][0] == 1 and "house-llm-7b" in got["prices check --json"][1]
    assert got == outputs["ref"]


@pytest.fixture(scope="module")
def law_index(tmp_path_factory):
    """A BM25 index of one fixture law (each test copies it: one embedded store per owner)."""

    root = tmp_path_factory.mktemp("index")
    index_company_law(root, retriever="bm25", llm_mode="extractive")
    return root / "data" / "edge"


def test_experiment_replay_gives_identical_results(ledger_url, tmp_path, law_index):
    """`rag experiment replay`: both arms answer the same labelled questions, costs read back from the ledger."""
    import shutil

    from rag_app.experiments.comparison import replay
    from rag_app.evaluation.qa import Gold, Question
    from rag_app.service.pool import VariantPool
    from tests.conftest import LAWS

    cfg = tmp_path / "exp.json"
    cfg.write_text(json.dumps({"variants": {"top1": {"top_n": 1}}, "experiments": {
        "topn": {"control": "default", "treatment": "top1", "rollout_pct": 10, "seed": "s"}}}))
    rel = "民法商法/公司法(2018-10-26).md"
    text = (LAWS / rel).read_text(encoding="utf-8")
    qs = []
    for n, label in enumerate(["第五十七条", "第二十条", "第三十七条"]):
        start = text.index(f"\n{label}") + 1
        qs.append(Question(f"q{n}", f"公司法{label}的内容是什么？", "recitation",
                           (Gold(rel, start, text.index("\n第", start + 3)),)))
    results = {}
    for name, url in (("ref", url_for_path(tmp_path / "ref.sqlite")), ("under_test", ledger_url)):
        data = tmp_path / f"data-{name}"
        shutil.copytree(law_index, data / "edge")
        pool = VariantPool(make_settings(tmp_path, data_dir=data, experiments_file=cfg, ledger_url=url,
                                         retriever="bm25", llm_mode="extractive", ledger_spill_dir=tmp_path / "spill"))
        try:
            res = replay(pool, pool.config.experiments["topn"], qs, LAWS, k=5)
        finally:
            pool.close()
        results[name] = {arm: {k: v for k, v in res["arms"][arm].items() if "latency" not in k}
                         for arm in ("control", "treatment")}
        results[name]["cost_diff"] = res["differences"]["cost_per_query"]
        results[name]["verdict"] = res["verdict"]
        with Ledger.open(url) as L:
            results[name]["origins"] = {r["origin"]: r["n"] for r in sql(
                L, "SELECT origin, COUNT(*) AS n FROM queries GROUP BY origin")}
    got = results["under_test"]
    assert got["origins"] == {"replay": 6} and got["control"]["recall@5"] == 1.0
    assert got["treatment"]["cost_per_query"] < got["control"]["cost_per_query"]
    assert got == results["ref"]


def test_rows_past_the_buffer_spill_and_the_next_writer_replays_them(ledger_url, tmp_path):
    w = LedgerWriter(ledger_url, max_buffer=20, batch=5, spill_dir=tmp_path / "spill")
    for i in range(300):
        w.put("stage_calls", {"query_id": f"q{i}", "stage": "retrieve", "status": "ok", "started_at": T0})
    assert w.flush(30)
    w.close()
    assert w.spilled > 0 and w.lost == 0 and w.written + w.spilled == 300
    w2 = LedgerWriter(ledger_url, spill_dir=tmp_path / "spill")  # the next start (or another replica)
    assert w2.flush(30)
    w2.close()
    with Ledger.open(ledger_url) as L:
        assert sql(L, "SELECT COUNT(*) AS n FROM stage_calls") == [{"n": 300}]
        kinds = {r["kind"]: int(r["n"]) for r in sql(L, "SELECT kind, SUM(rows) AS n FROM ledger_losses GROUP BY kind")}
    assert kinds == {"spilled": w.spilled, "replayed": w.spilled} and w2.replayed == w.spilled
    assert not any((tmp_path / "spill").glob("*.jsonl"))


def test_a_migration_failing_halfway_leaves_no_trace_and_a_rerun_succeeds(ledger_url, monkeypatch):
    from tracing.ledger import migrations

    calls = []

    def m999_two_columns(db):
        db.exec_driver_sql("ALTER TABLE queries ADD COLUMN first_col TEXT")
        db.exec_driver_sql("CREATE TABLE half_done (x INTEGER)")
        if not calls:
            calls.append(1)
            raise RuntimeError("boom after the first column")
        db.exec_driver_sql("ALTER TABLE queries ADD COLUMN second_col TEXT")

    with Ledger.open(ledger_url) as L:
        monkeypatch.setattr(migrations, "MIGRATIONS", [*MIGRATIONS, m999_two_columns])
        with pytest.raises(RuntimeError, match="boom"):
            migrations.migrate(L.engine)
        assert "first_col" not in columns(L, "queries")  # the ALTER TABLE was rolled back
        assert not sa.inspect(L.engine).has_table("half_done")
        with L.engine.connect() as db:
            assert migrations.pending(db) == ["m999_two_columns"]
        assert migrations.migrate(L.engine) == ["m999_two_columns"]  # no "column already exists"
        assert columns(L, "queries")[-2:] == ["first_col", "second_col"]
