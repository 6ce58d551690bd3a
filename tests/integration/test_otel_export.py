"""OpenTelemetry export against a real OTLP/HTTP receiver on a loopback socket (protobuf decoded with
opentelemetry-proto): the trace tree and every token and cost attribute equal the ledger's rows, and
a dead or hanging collector never slows or breaks a query (what cannot be sent is counted)."""
from __future__ import annotations

import base64
import json
import socket
import sqlite3
import time
import uuid

import httpx
import pytest

from rag_app.app import RagApp
from rag_app.core.errors import ConfigError
from tests.conftest import HANG_S, make_settings
from tests.fakes.openai_server import USAGE_SHAPES, FakeOpenAI, Reply, Slow, Status
from tests.fakes.otlp_receiver import OtlpReceiver
from tests.integration.trace_check import check_trace_equals_ledger, index_one_small_law, ledger
from tracing.observe import OtelExporter, normalise_endpoint, span_id_for, trace_id_for

QUESTION = "一人有限责任公司是什么？"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    return index_one_small_law(tmp_path_factory.mktemp("otel"))


def ask(settings, query_id: str, env=None):
    with RagApp(settings) as app:
        answer = app.ask(QUESTION, query_id=query_id)
        app.writer.flush()
        health_before_close = app.otel.health() if app.otel else None
    return answer, health_before_close


def test_trace_tree_and_attributes_equal_the_ledger(indexed, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-key=abc123")  # standard OTel variable, honoured
    qid = str(uuid.uuid4())
    fake = FakeOpenAI()
    fake.script = [Status(429, headers={"retry-after-ms": "20"}), Reply(usage=USAGE_SHAPES["openai"])]
    with fake, OtlpReceiver() as rx:
        settings = make_settings(indexed, retriever="bm25", openai_base_url=fake.base_url, llm_retry_base_s=0.01,
                                 otel_endpoint=rx.url)
        answer, _ = ask(settings, qid)
        assert answer.mode == "llm"
        spans = rx.wait_for(1)  # close() exported everything before returning
    query, rows = ledger(settings, qid)
    got = check_trace_equals_ledger(spans, query, rows)
    assert got["root"]["name"] == "query" and got["root"]["resource"]["service.name"] == "legal-rag"
    assert f"{trace_id_for(qid):032x}" == uuid.UUID(qid).hex  # the query id IS the trace id
    first, second = (s["attributes"] for s in got["attempts"])
    assert first["error.type"].endswith("RateLimitError") and first["rag.status"] == "retry"
    assert second["gen_ai.usage.cache_read.input_tokens"] == 1024
    assert second["gen_ai.usage.reasoning.output_tokens"] == 128
    assert second["llm.token_count.prompt_details.cache_read"] == 1024
    assert second["gen_ai.operation.name"] == "chat" and second["gen_ai.provider.name"] == "openai"
    assert second["openinference.span.kind"] == "LLM"
    assert second["rag.cost.nano_usd"] > 0 and second["rag.cost.usd"] == second["rag.cost.nano_usd"] / 1e9
    assert got["generate"]["attributes"]["rag.cost.nano_usd"] == sum(r["cost_nano_usd"] for r in rows
                                                                     if r["attempt_id"])
    assert rx.headers and all(h.get("x-collector-key") == "abc123" for h in rx.headers)
    assert not any(s["attributes"].get("input.value") for s in spans)  # no question text leaves the process


def test_unpriced_timeout_and_extractive_rows(indexed, monkeypatch):
    """A timed-out attempt of an unknown model: possibly billed, unpriced (never $0) on the span too."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    qid = str(uuid.uuid4())
    fake = FakeOpenAI()
    fake.script = [Slow(2.5), Reply(prompt_tokens=100, completion_tokens=7)]
    with fake, OtlpReceiver() as rx:
        settings = make_settings(indexed, retriever="bm25", openai_base_url=fake.base_url, llm_timeout_s=1.0,
                                 llm_retry_base_s=0.01, llm_model="house-llm-7b", otel_endpoint=rx.url)
        ask(settings, qid)
        extractive = make_settings(indexed, retriever="bm25", llm_mode="extractive", otel_endpoint=rx.url)
        qid2 = str(uuid.uuid4())
        ask(extractive, qid2)
        spans = rx.wait_for(1)
    got = check_trace_equals_ledger(spans, *ledger(settings, qid))
    timeout = got["attempts"][0]["attributes"]
    assert timeout["rag.status"] == "timeout" and timeout["rag.possibly_billed"] is True
    assert timeout["error.type"] == "timeout" and timeout["rag.cost.unpriced"] is True
    assert "rag.cost.nano_usd" not in timeout and "llm.cost.total" not in timeout
    assert "rag.cost.nano_usd" not in got["root"]["attributes"]
    # extractive: the generate row's shadow cost is there, but no LLM span claims tokens were billed
    got2 = check_trace_equals_ledger(spans, *ledger(extractive, qid2))
    (gen,) = [s for s in got2["stages"] if s["name"] == "generate"]
    assert gen["attributes"]["openinference.span.kind"] == "CHAIN"
    assert "llm.token_count.prompt" not in gen["attributes"] and "gen_ai.usage.input_tokens" not in gen["attributes"]
    assert gen["attributes"]["rag.shadow_cost.nano_usd"] > 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


EXPORT_TIMEOUT_S = 10.0  # an extractive ask here takes ~0.1 s quiet, ~1 s at load 20


@pytest.mark.parametrize("collector", ["dead", "hanging"])
def test_a_dead_or_hanging_collector_never_slows_or_breaks_queries(indexed, collector):
    """Extractive queries against a port nobody listens on, or a collector that never answers: each
    query returns long before the export timeout, every ledger row is written, and spans that could
    not be delivered are counted (failed or dropped), none silently lost."""
    # The export timeout is far longer than any query takes even on a machine at load 20, and the hanging
    # collector holds each request until the test releases it: a query or a close() that waited on the
    # collector would take the whole EXPORT_TIMEOUT_S, so the bounds below tell waiting from a slow machine.
    rx = OtlpReceiver(hang_s=600) if collector == "hanging" else None
    url = rx.__enter__().url if rx else f"http://127.0.0.1:{free_port()}/v1/traces"
    try:
        settings = make_settings(indexed, retriever="bm25", otel_endpoint=url, otel_timeout_s=EXPORT_TIMEOUT_S,
                                 otel_queue_spans=16)
        app = RagApp(settings)
        try:
            qids = [str(uuid.uuid4())]
            app.ask(QUESTION, query_id=qids[0])  # warm-up (jieba, store pages): not what is measured
            durations = []
            for i in range(12):
                qid = str(uuid.uuid4())
                t0 = time.perf_counter()
                answer = app.ask(QUESTION, query_id=qid)
                durations.append(time.perf_counter() - t0)
                qids.append(qid)
                assert answer.text
            assert max(durations) < EXPORT_TIMEOUT_S / 2  # nothing waited on the collector
            assert app.otel.drain(timeout_s=EXPORT_TIMEOUT_S)  # a hang guard: the builder never waits on the network
            live = app.otel.health()  # drops show while they happen (/healthz), not only at shutdown
            assert live["dropped_spans"] > 0 and live["queued_spans"] <= live["queue_limit"] == 16
            assert app.writer.flush()
            t0 = time.perf_counter()
            app.otel.close(timeout_s=1.0)
            assert time.perf_counter() - t0 < EXPORT_TIMEOUT_S / 2  # shutdown is bounded too
            if rx:
                rx.release()  # the batch in flight at close ends now, failed (close stopped its retries)
            while app.otel.health()["sending_spans"]:
                time.sleep(0.1)  # ends within EXPORT_TIMEOUT_S; pytest-timeout is the guard
            h = app.otel.health()
        finally:
            app.close()
        conn = sqlite3.connect(settings.ledger_path)
        marks = ",".join("?" * len(qids))
        n_queries = conn.execute(f"SELECT COUNT(*) FROM queries WHERE query_id IN ({marks})", qids).fetchone()[0]
        n_rows = conn.execute(f"SELECT COUNT(*) FROM stage_calls WHERE query_id IN ({marks})", qids).fetchone()[0]
        conn.close()
        assert n_queries == 13 and n_rows >= 13 * 3  # the ledger lost nothing
        # one span per query row and per stage row (extractive: no LLM attempts), each accounted for:
        # failed (sent, refused or timed out), dropped (queue full, or left at shutdown) or still being
        # sent by the SDK's worker when close() stopped waiting (it ends failed)
        assert h["exported_spans"] == 0 and h["queued_spans"] == 0
        assert h["failed_spans"] + h["dropped_spans"] + h["sending_spans"] == n_queries + n_rows
        assert h["sending_spans"] == 0 and h["failed_spans"] > 0 and h["dropped_spans"] > 0
        assert h["last_error"]
        assert h["faults"] == 0
    finally:
        if rx:
            rx.__exit__(None, None, None)


def test_healthz_shows_the_export_counters(indexed, monkeypatch):
    from tests.integration.test_service import Server

    with OtlpReceiver() as rx:
        settings = make_settings(indexed, retriever="bm25", otel_endpoint=rx.url)
        with Server(settings) as url:
            assert httpx.post(f"{url}/v1/ask", json={"question": QUESTION}, timeout=HANG_S).status_code == 200
            # the ask has returned: its spans are built beside it, not in it (polled until they are;
            # pytest-timeout is the guard, so a busy machine only makes this wait longer)
            while (health := httpx.get(f"{url}/healthz").json())["otel"]["traces"] < 1:
                time.sleep(0.05)
        assert health["status"] == "up"
        otel = health["otel"]
        assert otel["endpoint"] == rx.url and otel["traces"] == 1
        assert {"exported_spans", "failed_spans", "dropped_spans", "queued_spans"} <= set(otel)


def test_rows_without_their_query_row_still_land_in_the_right_trace():
    """A stage row whose query row never comes (crash, late row) goes out at close, under the
    query's derived root id, so a collector files it in that query's trace."""
    with OtlpReceiver() as rx:
        exp = OtelExporter(rx.url)
        exp.on_row("stage_calls", {"query_id": "q-late", "stage": "retrieve", "status": "ok", "input_tokens": 0,
                                   "output_tokens": 0, "cost_nano_usd": 0, "started_at": "2026-11-30T10:00:00.000+00:00",
                                   "latency_ms": 3.5})
        exp.on_row("stage_calls", {"query_id": "q-late", "stage": "generate", "status": "started",
                                   "attempt_id": "a1", "started_at": "2026-11-30T10:00:01.000+00:00"})
        assert exp.health()["waiting_queries"] == 1
        exp.close()
        (span,) = rx.wait_for(1)
    assert span["name"] == "retrieve" and span["trace_id"] == f"{trace_id_for('q-late'):032x}"
    assert span["parent_id"] == f"{span_id_for('q-late', 'query'):016x}"
    assert span["end_ns"] - span["start_ns"] == 3_500_000
    assert exp.health()["orphan_rows"] == 1  # the `started` row is never a span: its final row replaces it


def test_a_failing_row_observer_never_breaks_the_query(indexed):
    settings = make_settings(indexed, retriever="bm25")
    with RagApp(settings) as app:
        def explode(table, row):
            raise RuntimeError("observer exploded")

        seen = []
        app.tracer.row_observers += [explode, lambda table, row: seen.append((table, row["query_id"]))]
        assert app.ask(QUESTION, query_id="q-observer").text
        assert app.tracer.faults >= 3
        app.writer.flush()
        query, rows = ledger(settings, "q-observer")
        assert query["status"] == "ok"
        # the next observer still got every row: one observer's fault costs no other sink a row
        assert seen.count(("stage_calls", "q-observer")) == len(rows) and ("queries", "q-observer") in seen


def test_exporter_faults_are_counted_not_raised():
    exp = OtelExporter("http://127.0.0.1:9/v1/traces")
    exp.on_row("queries", {"query_id": "q1", "status": "ok", "started_at": "not a timestamp"})
    assert exp.drain(timeout_s=60)  # a hang guard
    assert exp.health()["faults"] == 1 and "not a timestamp" in exp.health()["last_error"]
    exp.close(timeout_s=0.5)


def test_endpoint_is_checked_and_normalised():
    assert normalise_endpoint("http://127.0.0.1:6006") == "http://127.0.0.1:6006/v1/traces"
    assert normalise_endpoint("http://collector:4318/v1/traces") == "http://collector:4318/v1/traces"
    assert normalise_endpoint("https://otel.example.org/custom/path") == "https://otel.example.org/custom/path"
    with pytest.raises(ConfigError, match="RAG_OTEL_ENDPOINT"):
        make_settings(__import__("pathlib").Path("/tmp"), otel_endpoint="127.0.0.1:6006")
    assert trace_id_for("8f14e45f-ceea-467f-a0e6-3d8f2a1b9c10") == 0x8F14E45FCEEA467FA0E63D8F2A1B9C10
    assert trace_id_for("q-1") == trace_id_for("q-1") != trace_id_for("q-2")


def test_an_exporter_that_raises_is_counted_as_failed():
    from opentelemetry.sdk.trace.export import SpanExporter

    class Broken(SpanExporter):
        def export(self, spans):
            raise RuntimeError("exporter bug")

        def shutdown(self):
            pass

    exp = OtelExporter("http://127.0.0.1:9/v1/traces", span_exporter=Broken())
    exp.on_row("queries", {"query_id": "q1", "status": "ok", "started_at": "2026-11-30T10:00:00.000+00:00",
                           "latency_ms": 1.0})
    assert exp.flush()
    h = exp.health()
    assert (h["failed_spans"], h["exported_spans"], h["faults"]) == (1, 0, 0)
    assert "exporter bug" in h["last_error"]
    exp.close()


def test_traces_waiting_to_be_built_are_bounded_and_counted():
    """While the builder thread is stuck, at most max_pending_queries traces wait; the rest are
    dropped with their span count, and on_row still returns at once."""
    import threading

    gate, entered, gave_up = threading.Event(), threading.Event(), threading.Event()
    exp = OtelExporter("http://127.0.0.1:9/v1/traces", max_pending_queries=2)
    build = exp._emit_trace

    def stuck(query, rows):  # the builder thread waits here on the first trace
        entered.set()
        if not gate.wait(60):  # no machine needs 60 s for the loop below: only an on_row that waits does
            gave_up.set()
        build(query, rows)

    def send(i: int) -> None:
        exp.on_row("stage_calls", {"query_id": f"q{i}", "stage": "retrieve", "status": "ok",
                                   "started_at": "2026-11-30T10:00:00.000+00:00", "latency_ms": 1.0})
        exp.on_row("queries", {"query_id": f"q{i}", "status": "ok", "started_at": "2026-11-30T10:00:00.000+00:00",
                               "latency_ms": 2.0})

    exp._emit_trace = stuck
    send(0)
    assert entered.wait(60)  # the builder took q0 and is stuck (a hang guard, not a speed check)
    for i in range(1, 6):
        send(i)
    assert not gave_up.is_set()  # every on_row returned while the builder was stuck
    h = exp.health()
    assert h["dropped_spans"] == 3 * 2  # q3..q5 (q0 is being built, q1 and q2 wait): root + retrieve each
    gate.set()
    assert exp.drain(timeout_s=60)  # a hang guard
    assert exp.health()["traces"] == 3
    exp.close(timeout_s=0.5)


def test_the_endpoints_credentials_never_show_in_health_logs_or_errors(caplog, tmp_path):
    """user:password is for the collector alone: the exporter gets the bare URL and an Authorization
    header, so /healthz, warnings and last_error (and the SDK's own retry warning) show scheme, host,
    port and path; a token in the query string is refused (a header carries it)."""
    from opentelemetry.sdk.trace.export import SpanExporter

    class Refusing(SpanExporter):
        def export(self, spans):
            raise ConnectionError("POST http://otlpuser:Hunter2pw@127.0.0.1:9/v1/traces?token=Tok3nXYZ refused")

        def shutdown(self):
            pass

    exp = OtelExporter("http://otlpuser:Hunter2pw@127.0.0.1:9/v1/traces", span_exporter=Refusing())
    exp.on_row("queries", {"query_id": "q1", "status": "ok", "started_at": "2026-11-30T10:00:00.000+00:00",
                           "latency_ms": 1.0})
    exp.flush()
    h = exp.health()
    exp.close()
    shown = json.dumps(h) + caplog.text
    assert h["endpoint"] == "http://127.0.0.1:9/v1/traces" and h["failed_spans"] == 1
    assert "Hunter2pw" not in shown and "otlpuser" not in shown and "Tok3nXYZ" not in shown
    for bad in ("ftp://u:Hunter2pw@collector/v1/traces?token=Tok3nXYZ", "http://collector:4318/v1/traces?token=Tok3nXYZ"):
        with pytest.raises(ConfigError) as e:
            make_settings(tmp_path, otel_endpoint=bad)
        assert "Hunter2pw" not in str(e.value) and "Tok3nXYZ" not in str(e.value)
    assert "OTEL_EXPORTER_OTLP_HEADERS" in str(e.value)


def test_the_sdk_exporter_never_holds_userinfo_and_the_collector_gets_it_as_a_header(caplog):
    """The OTLP exporter logs its endpoint when a post fails and it retries: it is given the URL without
    user information, which reaches the collector as `Authorization: Basic` instead."""
    with OtlpReceiver() as rx:
        host = rx.url.split("://", 1)[1]
        exp = OtelExporter(f"http://otlpuser:Hunter2pw@{host}")
        inner = exp._processor.span_exporter.inner
        assert "Hunter2pw" not in inner._endpoint and "otlpuser" not in inner._endpoint
        exp.on_row("queries", {"query_id": "q1", "status": "ok", "started_at": "2026-11-30T10:00:00.000+00:00",
                               "latency_ms": 1.0})
        exp.flush()
        rx.wait_for(1)
        exp.close()
    sent = {k.lower(): v for k, v in rx.headers[-1].items()}
    assert sent["authorization"] == "Basic " + base64.b64encode(b"otlpuser:Hunter2pw").decode()


def test_a_webhook_url_is_never_echoed_whole(tmp_path):
    with pytest.raises(ConfigError) as e:
        make_settings(tmp_path, alert_webhook="hxxps://hooks.example.com/services/T00/B00/SecretTok3n")
    assert "SecretTok3n" not in str(e.value) and "RAG_ALERT_WEBHOOK" in str(e.value)
