"""Budgets at the front door (#23 item 1): `rag serve` with RAG_BUDGETS_FILE over real sockets and the
local fake LLM: a hard limit answers 429 with the limit, the spend and the reset time; "*" counts each
user apart; soft limits and alerts write an event row and reach the webhook; unpriced spend is unknown,
never free; `rag budgets` shows the same figures."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
import openai
import pytest

from tests.conftest import HANG_S, index_company_law, make_settings, wait_until
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.serve_proc import serve_env
from tests.fakes.sql_ledger import select_rows
from tests.fakes.webhook_receiver import WebhookReceiver
from tests.integration.test_service import Server

Q = "一人有限责任公司是什么？"
MORE_QUESTIONS = ["股东会的职权有哪些？", "董事会由几人组成？", "监事会的职权是什么？", "公司可以发行哪些股份？",
                  "有限责任公司的股东人数有限制吗？", "公司合并需要什么程序？", "公司解散的原因有哪些？",
                  "清算组在清算期间行使哪些职权？", "公司的法定代表人由谁担任？", "股东可以查阅哪些公司资料？"]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    root = tmp_path_factory.mktemp("budgets")
    index_company_law(root)
    return root


def write_budgets(path, budgets):
    path.write_text(json.dumps({"budgets": budgets}), encoding="utf-8")
    return path


def ask(url, user, question=Q, **kw):
    return httpx.post(f"{url}/v1/ask", json={"question": question, "user_id": user, **kw}, timeout=HANG_S)


def test_hard_limit_429_each_user_apart_events_and_webhook(indexed, tmp_path):
    hook = WebhookReceiver()
    # one query costs ~$0.000075 at gpt-4o-mini prices; each reserves at least the price of a question (its
    # token budget and RAG_LLM_MAX_TOKENS, ~$0.00052), so a $0.0012 limit admits queries while what they
    # spent plus one question's price fits
    budgets = write_budgets(tmp_path / "budgets.json", [
        {"user": "*", "period": "day", "limit_usd": 0.0012, "hard": True},
        {"variant": "*", "period": "month", "limit_usd": 0.00001, "hard": False, "alert_at": 0.5}])
    with FakeOpenAI() as llm:
        settings = make_settings(indexed, openai_base_url=llm.base_url, budgets_file=budgets,
                                 alert_webhook=hook.url)
        with Server(settings) as url:
            audit = httpx.get(f"{url}/v1/keys/audit", timeout=HANG_S).json()["events"]
            assert [(e["action"], e["target"]) for e in audit] == [("budgets", str(budgets))]  # the file, audited
            costs, refused = [], None
            for question in [Q] + MORE_QUESTIONS:  # new questions each time (a repeat is a free cache hit)
                r = ask(url, "u1", question=question)
                if r.status_code != 200:
                    refused = r
                    break
                costs.append(r.json()["total_cost_usd"])
                wait_until(lambda: httpx.get(f"{url}/v1/queries/{r.json()['query_id']}").status_code == 200,
                           "the query's rows in the ledger")
            assert refused is not None and refused.status_code == 429, refused and refused.text
            cost = sum(costs)
            assert 2 <= len(costs) and cost <= 0.0012  # admitted while they fit, never past the limit
            body = refused.json()
            assert body["type"] == "budget_exceeded" and body["budget"] == "user=* day" and body["value"] == "u1"
            assert body["limit_usd"] == pytest.approx(0.0012) and body["estimate_usd"] > 0
            assert cost + body["estimate_usd"] > 0.0012  # refused because its own estimate does not fit
            assert body["spend_usd"] == pytest.approx(cost) and body["unpriced_calls"] == 0
            tomorrow = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%d")
            assert body["reset_at"].startswith(f"{tomorrow}T00:00:00")
            assert 0 < int(refused.headers["Retry-After"]) <= 86_401
            assert len(llm.requests) == len(costs)  # the refused query never reached the LLM
            with pytest.raises(openai.RateLimitError) as over:  # the OpenAI-compatible door has the same budgets
                openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0).chat.completions.create(
                    model="legal-rag", user="u1", messages=[{"role": "user", "content": "董事的任期是几年？"}])
            assert over.value.response.json()["budget"] == "user=* day" and len(llm.requests) == len(costs)
            assert ask(url, "u2", question="公司债券如何发行？").status_code == 200  # "*": each user has a budget of its own
            status = httpx.get(f"{url}/v1/budgets").json()
            users = {r["value"]: r for r in status["budgets"] if r["budget"] == "user=* day"}
            assert set(users) == {"u1", "u2"} and users["u1"]["spend_usd"] == pytest.approx(cost)
            assert 0.5 < users["u1"]["used"] <= 1 and users["u1"]["spend_known"]
            # the soft variant budget and its alert each fired once (the second crossing writes nothing)
            wait_until(lambda: len(hook.events) >= 3, "webhook deliveries")
            kinds = sorted((e["kind"], e["value"]) for e in hook.events)
            assert kinds == [("alert", "default"), ("hard", "u1"), ("soft", "default")], kinds
            assert hook.calls == 4  # the first delivery failed and was retried
            wait_until(lambda: {e["webhook"] for e in httpx.get(f"{url}/v1/budgets").json()["events"]} == {"sent"},
                       "events marked sent")
    hook.close()
    rows = select_rows(settings.ledger, "SELECT kind, value FROM budget_events ORDER BY id")
    assert sorted(rows) == [("alert@0.5", "default"), ("hard", "u1"), ("soft", "default")]  # the alert at 50%
    # `rag budgets` reads the same ledger
    env = serve_env(indexed / "data" / "..", None, RAG_DATA_DIR=str(settings.data_dir), RAG_BUDGETS_FILE=str(budgets))
    out = subprocess.run([sys.executable, "-m", "rag_app.cli.main", "budgets"], env=env, capture_output=True, text=True,
                         timeout=HANG_S)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["BUDGET", "WHO", "LIMIT", "SPENT", "USED", "UNPRICED", "RESETS", "IN"]
    assert any(line.split()[:3] == ["user=*", "day", "u1"] for line in lines) and max(map(len, lines)) <= 80
    js = json.loads(subprocess.run([sys.executable, "-m", "rag_app.cli.main", "budgets", "--json"], env=env,
                                   capture_output=True, text=True, timeout=HANG_S).stdout)
    assert {r["value"] for r in js["budgets"] if r["dim"] == "user"} == {"u1", "u2"}


def test_a_burst_on_a_fresh_ledger_stops_at_the_limit(indexed, tmp_path):
    """20 asks at once, a hard limit of 5.5 questions' price, no history: 5 answered, 15 refused (0.7.0
    admitted all 20: its estimate was the mean of past queries, $0 with none). Every admitted request is
    held at the LLM until all 20 are decided, so none finishes early and lowers the estimate."""
    from concurrent.futures import ThreadPoolExecutor

    from rag_app.spend.budgets import price_of_a_question
    from tests.fakes.openai_server import Held
    from tracing.pricing import PriceTable

    questions = [f"{Q}第{i:02d}问" for i in range(20)]  # one length: one price each
    with FakeOpenAI() as llm:
        settings = make_settings(indexed, openai_base_url=llm.base_url, budgets_file=tmp_path / "budgets.json",
                                 data_dir=indexed / "data", ledger_url=f"sqlite:///{tmp_path}/l.sqlite")
        price = price_of_a_question(PriceTable.load(None), settings)(questions[0])
        write_budgets(tmp_path / "budgets.json", [{"user": "*", "period": "day", "limit_usd": 5.5 * price / 1e9}])
        gate = threading.Event()
        llm.script = [Held(gate) for _ in questions]
        with Server(settings) as url, ThreadPoolExecutor(20) as pool:
            futures = [pool.submit(ask, url, "u1", q) for q in questions]
            wait_until(lambda: sum(f.done() for f in futures) + len(llm.requests) >= 20, "every ask decided")
            gate.set()
            codes = [f.result().status_code for f in futures]
    print(f"\n[burst] 20 asks, limit 5.5 x ${price / 1e9:.7f}: answered {codes.count(200)}, "
          f"refused {codes.count(429)}")
    assert (codes.count(200), codes.count(429)) == (5, 15)


@pytest.mark.parametrize("policy", ["block", "allow"])
def test_unpriced_spend_is_unknown_never_free(indexed, tmp_path, policy):
    budgets = write_budgets(tmp_path / "budgets.json", [{"user": "u9", "period": "day", "limit_usd": 100.0}])
    with FakeOpenAI() as llm:
        settings = make_settings(indexed, openai_base_url=llm.base_url, budgets_file=budgets,
                                 llm_model="house-llm-7b", budget_unpriced=policy,
                                 budget_unpriced_assume_usd="0.01" if policy == "allow" else None,
                                 data_dir=indexed / "data", ledger_url=f"sqlite:///{tmp_path}/l.sqlite")
        with Server(settings) as url:
            first = ask(url, "u9")
            if policy == "block":  # the model has no price: its cost is unknown from the first call
                assert first.status_code == 429 and "no price" in first.json()["detail"], first.text
                assert first.json()["estimate_usd"] is None and len(llm.requests) == 0
                return
            assert first.status_code == 200, first.text
            wait_until(lambda: httpx.get(f"{url}/v1/queries/{first.json()['query_id']}").status_code == 200,
                       "first query's rows in the ledger")
            second = ask(url, "u9", question="股东会的职权有哪些？")
            row = httpx.get(f"{url}/v1/budgets").json()["budgets"][0]
    assert row["unpriced_calls"] >= 1 and row["spend_known"] is False
    assert second.status_code == 200, second.text  # allow: each unpriced call at $0.01, far under $100


@pytest.mark.parametrize("replies", [(300,), (20, 400)], ids=["same-length", "20-then-400"])
def test_one_user_asking_in_turn_overshoots_a_hard_limit_by_at_most_the_estimates_error(indexed, tmp_path, replies):
    """$0.002 a day, one user, one ask at a time, a vendor whose replies are all 300 tokens long, or 20 then
    400 in turn: the last admitted query costs what it costs, not its estimate, so the spend may pass the
    limit, but by no more than one estimate's error (0.7.0 left the asking query's own estimate out: +44%).
    Since each query reserves at least the price of a question at its ceiling, it stays under: 7 answered,
    -20%; 9 answered, -27%."""
    from rag_app.spend.budgets import price_of_a_question
    from tests.fakes.openai_server import Reply
    from tracing.pricing import PriceTable

    limit = 0.002  # several answers fit under it beside the reserved price of a question ($0.00056)
    budgets = write_budgets(tmp_path / "budgets.json", [{"user": "u1", "period": "day", "limit_usd": limit}])
    with FakeOpenAI() as llm:
        llm.script = [Reply(completion_tokens=n) for n in replies * 16]
        settings = make_settings(indexed, openai_base_url=llm.base_url, budgets_file=budgets,
                                 data_dir=indexed / "data", ledger_url=f"sqlite:///{tmp_path}/l.sqlite")
        price = price_of_a_question(PriceTable.load(None), settings)
        costs: list[float] = []
        errors: list[float] = []  # each admitted query's cost minus the estimate it was admitted at
        with Server(settings) as url:
            for question in [Q] + MORE_QUESTIONS:
                estimate = (sum(costs[-20:]) / len(costs[-20:])) if costs else price(question) / 1e9
                r = ask(url, "u1", question=question)
                if r.status_code == 429:
                    break
                assert r.status_code == 200, r.text
                costs.append(r.json()["total_cost_usd"])
                errors.append(costs[-1] - estimate)
                wait_until(lambda: httpx.get(f"{url}/v1/queries/{r.json()['query_id']}").status_code == 200,
                           "the query's rows in the ledger")
    assert r.status_code == 429 and len(costs) >= 3, r.text
    spent = sum(costs)
    print(f"\n[overshoot {replies}] ${limit} limit, {len(costs)} answered in turn: spent ${spent:.7f} "
          f"({(spent - limit) / limit:+.1%}); largest estimate error ${max(errors):.7f} "
          f"({max(errors) / limit:.1%} of the limit)")
    assert spent - limit <= max(0.0, max(errors)) + 1e-12


@pytest.mark.parametrize("budgets, field", [
    ([{"user": "*", "period": "fortnight", "limit_usd": 1}], "budgets[0].period"),
    ([{"user": "*", "key": "*", "period": "day", "limit_usd": 1}], "exactly one of key, user, variant"),
    ([{"user": "*", "period": "day", "limit_usd": -1}], "budgets[0].limit_usd"),
    ([{"user": "*", "period": "day"}], "limit_usd or limit_cny"),
    ([{"user": "*", "period": "day", "limit_usd": 1, "alert_at": 2}], "budgets[0].alert_at"),
    ([{"user": "*", "period": "day", "limit_usd": 1, "hard": "yes"}], "budgets[0].hard"),
    ([{"user": "*", "period": "day", "limit_usd": 1, "limt": 2}], "unknown field 'limt'"),
])
def test_a_bad_budgets_file_stops_serve_with_one_line(tmp_path, budgets, field):
    path = write_budgets(tmp_path / "b.json", budgets)
    env = serve_env(tmp_path / "data", None, RAG_BUDGETS_FILE=str(path))
    r = subprocess.run([sys.executable, "-m", "rag_app.cli.main", "budgets"], env=env, capture_output=True, text=True,
                       timeout=HANG_S)
    assert r.returncode == 2 and field in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_held_webhook_never_holds_a_query(indexed, tmp_path):
    """The webhook's receiver holds every request open: the answers still come back, each alert waits
    in the background, and its row says `pending` until the receiver lets go."""
    gate, received = threading.Event(), threading.Event()

    class Held(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            received.set()
            gate.wait(60)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass

    hook = HTTPServer(("127.0.0.1", 0), Held)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    budgets = write_budgets(tmp_path / "b.json", [{"user": "*", "period": "day", "limit_usd": 0.00001, "hard": False}])
    with FakeOpenAI() as llm:
        settings = make_settings(indexed, openai_base_url=llm.base_url, budgets_file=budgets,
                                 alert_webhook=f"http://127.0.0.1:{hook.server_port}/",
                                 ledger_url=f"sqlite:///{tmp_path}/l.sqlite")  # this test's events only
        with Server(settings) as url:
            first = ask(url, "u5")
            wait_until(lambda: httpx.get(f"{url}/v1/queries/{first.json()['query_id']}").status_code == 200, "rows")
            second = ask(url, "u5", question="股东会的职权有哪些？")  # over the soft limit: an event, then the webhook
            wait_until(received.is_set, "the webhook request")
            third = ask(url, "u5", question="董事会由几人组成？")  # answered while the webhook is held
            assert [r.status_code for r in (first, second, third)] == [200, 200, 200]
            assert [e["webhook"] for e in httpx.get(f"{url}/v1/budgets").json()["events"]] == ["pending"]
            gate.set()
            wait_until(lambda: httpx.get(f"{url}/v1/budgets").json()["events"][0]["webhook"] == "sent", "sent")
    hook.shutdown()
