"""The dashboard in a real headless Chromium (Debian's package, driven by Playwright), over a ledger
seeded through the real service; the page must show the numbers `rag report` / compare compute."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import httpx
import pytest

from rag_app.app import RagApp
from rag_app.experiments.comparison import compare_live
from rag_app.present.cost_render import usd
from rag_app.experiments.variants import ExperimentConfig
from tests.conftest import HANG_S, LAWS, make_settings, wait_until
from tests.fakes.openai_server import FakeOpenAI, Reply, Status
from tests.integration.test_service import Server
from rag_app.service import app as service_app
from tracing.ledger import Ledger
from rag_app.service.app import api_key_id

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# `make screenshots` sets DASHBOARD_SCREENSHOTS=docs/images: the README's three pictures are taken here, from
# the scripted runs below (README_SHOTS); every other screenshot stays in the test's temporary folder
README_SHOTS = ("dashboard-home.png", "query-page.png", "experiment-page.png")


def readme_shot(page, name: str, fallback: Path, height: int) -> Path:
    """The top `height` px of the page at 1280 px wide, as the README shows it."""
    assert name in README_SHOTS
    folder = Path(os.environ.get("DASHBOARD_SCREENSHOTS", fallback))
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name), full_page=True, clip={"x": 0, "y": 0, "width": 1280, "height": height})
    return folder / name


@pytest.fixture
def seeded(tmp_path):
    cfg = tmp_path / "exp.json"
    cfg.write_text(json.dumps({"variants": {"top3": {"top_n": 3}}, "experiments": {
        "topn": {"control": "default", "treatment": "top3", "rollout_pct": 50, "seed": "dash"}}}))
    with RagApp(make_settings(tmp_path)) as app:
        app.ingest([LAWS / "民法商法/公司法(2018-10-26).md"])
    return tmp_path, cfg


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (.ci/run installs it)")
def test_dashboard_shows_the_ledger(seeded, monkeypatch):
    from playwright.sync_api import expect, sync_playwright

    root, cfg = seeded
    shots = root / "shots"
    shots.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(service_app, "RECENT_ANSWERS", 10)  # 12 asks: the two oldest answers are dropped
    with FakeOpenAI() as llm:
        llm.script = [Status(429, headers={"retry-after-ms": "5"})]  # one retried attempt in the ledger
        budgets = root / "budgets.json"  # #23: the budgets panel; the answer cache off (12 asks, 12 runs)
        budgets.write_text('{"budgets": [{"user": "*", "period": "day", "limit_usd": 100}]}')
        settings = make_settings(root, openai_base_url=llm.base_url, experiments_file=cfg, experiment="topn",
                                 llm_retry_base_s=0.01, api_token="tok", answer_cache_size=0, budgets_file=budgets)
        with Server(settings) as url:
            h = {"Authorization": "Bearer tok"}
            said = {}
            for i in range(12):
                r = httpx.post(f"{url}/v1/ask", headers=h, timeout=HANG_S,
                               json={"question": ["股东会的职权有哪些？", "一人有限责任公司是什么？", "董事会由几人组成？"][i % 3],
                                     "user_id": f"user-{i}"})
                assert r.status_code == 200, r.text
                said[r.json()["query_id"]] = r.json()
            with Ledger.open(settings.ledger_path) as ledger:
                # the writer lands rows after the answer is sent: read once all 12 are in (on a loaded
                # machine the last one was still in flight, and the dashboard, read later, had one more)
                wait_until(lambda: ledger.report().totals["queries"] == 12, "the 12 queries' ledger rows")
                totals = ledger.report().totals
                rows = ledger.report().queries
                exp = compare_live(ledger, ExperimentConfig.load(cfg).experiments["topn"])
                by_user = ledger.by("user")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run"])
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                # a CSP refusal (an inline handler, a style the policy forbids) is a console error; a script error a page error
                blocked = []
                page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
                page.on("pageerror", lambda e: blocked.append(str(e)))
                assert page.goto(f"{url}/dashboard").status == 401  # the token is required
                blocked.clear()
                page.goto(f"{url}/dashboard?token=tok")
                page.wait_for_selector("#queries tbody tr")
                check_charts(page, rows)
                assert page.inner_text("#t-queries") == str(totals["queries"]) == "12"
                assert page.inner_text("#t-cost") == usd(totals['cost_usd'])
                assert page.inner_text("#t-waste") == usd(totals['retry_timeout_waste_usd'])
                assert page.inner_text("#t-unpriced") == f"{totals['unpriced_rows']} rows"
                assert page.locator("#queries tbody tr").count() == 12
                assert page.locator("#chart-stages rect").count() == 12 * 4  # a bar segment per stage per query
                assert page.inner_text("#t-answer-cache") == "0.0%" and "$0" in page.inner_text("#t-saved")
                # answer quality beside the cost (the fake LLM answers every question with 第五十七条 [1]:
                # grounded only where passage [1] holds it)
                quality = httpx.get(f"{url}/v1/reports/summary", headers={"Authorization": "Bearer tok"}).json()["quality"]
                assert quality["scored_answers"] == 12 and 0 < quality["mean_groundedness"] <= 1
                assert page.inner_text("#t-quality") == f"{100 * quality['mean_groundedness']:.1f}%"
                assert "12 scored" in page.inner_text("#t-quality-more")
                assert "0.0% refused" in page.inner_text("#t-refusals")
                # to review: nobody said anything yet, so only answers grounded at most half (the fake's
                # 第五十七条 [1] where passage [1] is another article) or citing what was not sent are listed
                low = httpx.get(f"{url}/v1/review", headers={"Authorization": "Bearer tok"}).json()["answers"]
                assert all(set(a["why"]) <= {"low_grounded", "invalid_citation"} and a["why"] for a in low)
                assert all(a["groundedness"] is None or a["groundedness"] <= 0.5 or "invalid_citation" in a["why"]
                           for a in low)
                page.wait_for_selector("#review tbody tr" if low else "#review-none")
                assert page.locator("#review tbody tr").count() == len(low)
                if low:  # its page highlights the claim that is not supported, with the reason
                    page.goto(f"{url}/dashboard?token=tok#/query/{low[0]['query_id']}")
                    page.wait_for_selector("#q-claims li.unsupported")
                    assert low[0]["claims"][0]["why"] in page.inner_text("#q-claims li.unsupported")
                    page.goto(f"{url}/dashboard?token=tok#/")
                    page.wait_for_selector("#review tbody tr")
                # a reader marks an answer wrong with the buttons on its page, and says why
                wrong = next(r["query_id"] for r in rows if r["query_id"] not in {a["query_id"] for a in low})
                page.goto(f"{url}/dashboard?token=tok#/query/{wrong}")
                page.wait_for_selector("#q-feedback button[data-score='-1']")
                page.fill("#q-comment", "引用的条文不对")
                page.click("#q-feedback button[data-score='-1']")
                page.wait_for_selector("#q-feedback-said:text('saved: wrong')")
                kept = httpx.get(f"{url}/v1/queries/{wrong}", headers={"Authorization": "Bearer tok"}).json()["feedback"]
                assert [(f["score"], f["comment"]) for f in kept] == [(-1, "引用的条文不对")]
                page.goto(f"{url}/dashboard?token=tok#/")
                page.reload()
                page.wait_for_selector(f"#review tr[data-id='{wrong}']")
                marked = page.locator(f"#review tr[data-id='{wrong}']").inner_text()
                assert "引用的条文不对" in marked and "marked wrong" in marked
                assert page.locator("#review tbody tr").count() == len(low) + 1
                assert "1 marked wrong" in page.inner_text("#t-quality-more")
                page.wait_for_selector("#budgets tbody tr")
                assert page.locator("#budgets tbody tr").count() == 12  # "*": one row per user that spent
                assert "user=* day" in page.locator("#budgets tbody tr").first.inner_text()
                # spend per user and per API key (#11 item 4): the same rows as `rag report --by`
                page.wait_for_selector("#by tbody tr")
                assert page.locator("#by tbody tr").count() == len(by_user) == 12
                top = page.locator("#by tbody tr").first
                assert top.get_attribute("data-value") == by_user[0]["user"]
                assert usd(by_user[0]["cost_usd"]) in top.inner_text()
                page.select_option("#by-dim", "key")
                page.wait_for_selector("#by-name:text('key')")
                assert page.locator("#by tbody tr").count() == 1
                assert page.locator("#by tbody tr").first.get_attribute("data-value") == api_key_id("tok")
                assert "12" in page.locator("#by tbody tr").first.inner_text()
                first = page.locator("#queries tbody tr").first
                assert first.get_attribute("data-id") == rows[0]["query_id"]  # newest first, as in rag report
                assert usd(rows[0]['cost_usd']) in first.inner_text()
                page.screenshot(path=str(shots / "dashboard-1280.png"), full_page=True)
                readme_shot(page, "dashboard-home.png", shots, 1100)
                page.set_viewport_size({"width": 760, "height": 900})
                fits_760(page, "#queries")
                page.screenshot(path=str(shots / "dashboard-760.png"), full_page=True)
                page.set_viewport_size({"width": 1280, "height": 900})
                # filter by variant (on the server, over the whole ledger), then by quality, then sort by cost
                page.select_option("#f-variant", "top3")
                n_top3 = sum(r["variant"] == "top3" for r in rows)
                expect(page.locator("#queries tbody tr")).to_have_count(n_top3)
                page.select_option("#f-variant", "")
                expect(page.locator("#queries tbody tr")).to_have_count(12)
                page.select_option("#f-quality", "marked_wrong")  # the answer marked wrong above, and only it
                expect(page.locator("#queries tbody tr")).to_have_count(1)
                assert page.locator("#queries tbody tr").first.get_attribute("data-id") == wrong
                assert "−1" in page.locator("#queries tbody tr").first.inner_text()
                page.select_option("#f-quality", "")
                page.fill("#f-grounded", "50")  # grounded below 50%: the review list's low ones
                page.dispatch_event("#f-grounded", "change")
                expect(page.locator("#queries tbody tr")).to_have_count(len(low))
                page.fill("#f-grounded", "")
                page.dispatch_event("#f-grounded", "change")
                expect(page.locator("#queries tbody tr")).to_have_count(12)
                page.click("th[data-key=cost_usd]")
                # click into the query that had the 429: its retry and the success are both listed
                retried = next(r for r in rows if r["retries"])
                page.click(f"tr[data-id='{retried['query_id']}']")
                page.wait_for_selector("#stages tbody tr")
                text = page.inner_text("#stages")
                assert "retry" in text and text.count("generate") == 2
                assert page.inner_text("#q-cost") == usd(retried['cost_usd'])
                assert "quality: grounded" in page.inner_text("#q-quality")
                # the retried query was the first of 12 and the server keeps the last 10 answers: its costs
                # still show, and the page says why there is no text
                assert retried["query_id"] == rows[-1]["query_id"]
                page.wait_for_selector("#q-answer-missing")
                assert "keeps the last 10 answers it gave" in page.inner_text("#q-answer-missing")
                # beside the stage rows of a recent query: the answer, its citations and the passages sent to the model
                newest = rows[0]["query_id"]
                answer = said[newest]
                page.goto(f"{url}/dashboard?token=tok#/query/{newest}")
                page.wait_for_selector("#q-answer")
                assert page.inner_text("#q-answer") == answer["answer"]
                assert page.locator("#stages tbody tr:not(.error-row)").count() == len(answer["stages"])
                assert page.locator("#q-citations li").count() == len(answer["citations"]) > 0
                first_cite = answer["citations"][0]
                assert f"chars {first_cite['char_start']}–{first_cite['char_end']}" in page.inner_text("#q-citations")
                assert page.locator("#q-passages .passage").count() == len(answer["passages"]) > 0
                assert page.inner_text("#q-passages .passage pre >> nth=0") == answer["passages"][0]["text"]
                costs, text = page.locator("#q-costs").bounding_box(), page.locator("#q-said").bounding_box()
                assert text["x"] >= costs["x"] + costs["width"] and abs(text["y"] - costs["y"]) < 5  # side by side
                page.screenshot(path=str(shots / "query-1280.png"), full_page=True)
                readme_shot(page, "query-page.png", shots, 1000)
                page.set_viewport_size({"width": 760, "height": 900})
                fits_760(page, "#q-answer")
                page.screenshot(path=str(shots / "query-760.png"), full_page=True)
                page.set_viewport_size({"width": 1280, "height": 900})
                # the experiment page shows compare's numbers and verdict
                page.goto(f"{url}/dashboard?token=tok#/experiment/topn")
                page.wait_for_selector("#verdict")
                assert page.inner_text("#verdict") == f"verdict: {exp['verdict']}"
                control = page.locator("tr[data-arm=control]").inner_text()
                assert str(exp["arms"]["control"]["queries"]) in control
                # each metric that decides, with its direction: quality beside cost (12 answers scored)
                metrics = page.locator("#metrics tr[data-metric]").all_inner_texts()
                assert [m.split()[0] for m in metrics] == list(exp["metrics"]), metrics
                assert "primary" in metrics[0] and "lower" in metrics[0]
                page.screenshot(path=str(shots / "experiment.png"), full_page=True)
                assert not blocked, blocked
                browser.close()
    for name in ("dashboard-1280", "dashboard-760", "query-1280", "query-760"):
        assert (shots / f"{name}.png").stat().st_size > 10_000
    print(f"\n[dashboard] screenshots in {shots}")


def check_charts(page, rows):
    """Every chart names its unit on its y axis and what its x axis counts; cost and latency are apart,
    and each y axis reaches the largest value drawn on it."""
    for chart, unit in (("#chart-stages", "(USD)"), ("#chart-cost", "(USD)"), ("#chart-latency", "(ms)")):
        y_title = page.text_content(f"{chart} .y-title")  # SVG text: text_content, not inner_text
        assert y_title.endswith(unit) and ("USD" in y_title) != ("ms" in y_title), (chart, y_title)
        assert "queries in the order asked (12)" == page.text_content(f"{chart} .x-title")
        assert page.locator(f"{chart} text.tick").count() >= 4  # two y ticks at least, both x ends
    latency_ticks = [float(t.replace(",", "")) for t in page.locator("#chart-latency text.tick").all_text_contents()[:-2]]
    assert latency_ticks[0] == 0 and latency_ticks[-1] >= max(r["latency_ms"] for r in rows)
    cost_ticks = [float(t.lstrip("$")) for t in page.locator("#chart-cost text.tick").all_text_contents()[:-2]]
    assert cost_ticks[-1] >= max(r["cost_usd"] for r in rows)


def fits_760(page, selector):
    """At 760 px nothing spills: the page does not scroll sideways and `selector` lies inside the window."""
    assert page.evaluate("document.documentElement.scrollWidth") <= 760
    box = page.locator(selector).bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 760, box


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (.ci/run installs it)")
def test_an_unpriced_stage_is_marked_in_the_chart_never_drawn_as_zero(seeded):
    from playwright.sync_api import sync_playwright

    root, _ = seeded
    with FakeOpenAI() as llm:
        for model in ("gpt-4o-mini", "acme-secret-7b"):  # one priced answer, then one from a model with no price
            settings = make_settings(root, openai_base_url=llm.base_url, llm_model=model, answer_cache_size=0)
            with Server(settings) as url:
                assert httpx.post(f"{url}/v1/ask", json={"question": "股东会的职权有哪些？"}, timeout=HANG_S).status_code == 200
        with Server(settings) as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            page.goto(f"{url}/dashboard")
            page.wait_for_selector("#chart-stages rect", state="attached")
            titles = page.locator("#chart-stages rect title").all_text_contents()
            assert [t.split()[1:] for t in titles if "unpriced" in t] == [["generate", "unpriced"]]
            assert page.locator("#chart-stages rect[data-unpriced]").count() == 1
            assert not any(t.endswith("generate $0") for t in titles), titles
            assert "dashed: unpriced" in page.inner_text("#chart-stages .legend")
            browser.close()


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (.ci/run installs it)")
def test_quality_over_time_per_variant_is_charted_beside_cost(tmp_path):
    """The home page charts each variant's mean groundedness and invalid-citation share per day beside
    its cost per query per day, from GET /v1/reports/quality; a day nothing was scored (or priced) is a
    gap, never a point at 0."""
    from datetime import UTC, datetime, timedelta

    from playwright.sync_api import sync_playwright

    from tracing.ledger import LedgerWriter

    settings = make_settings(tmp_path, answer_cache_size=0)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    today = datetime.now(UTC).date()
    days = [(today - timedelta(days=d)).isoformat() for d in (2, 1, 0)]
    w = LedgerWriter(settings.ledger_path)
    for di, day in enumerate(days):
        for variant, cost, grounded in (("control", 900_000, 0.9), ("cheap", 300_000, 0.4)):
            for k in range(2):
                qid = f"{variant}-{day}-{k}"
                ts = f"{day}T0{k}:00:00.000+00:00"
                w.put("queries", {"query_id": qid, "kind": "query", "status": "ok", "variant": variant, "mode": "llm",
                                  "started_at": ts, "question": "股东会的职权有哪些？", "origin": "live"})
                unpriced = variant == "cheap" and di == 1  # a day whose model had no price: no cost point
                w.put("stage_calls", {"query_id": qid, "stage": "generate", "status": "ok", "model": "m", "input_tokens": 10,
                                      "cost_nano_usd": None if unpriced else cost, "price_source": "unpriced" if unpriced else "bundled",
                                      "variant": variant, "started_at": ts})
                if variant == "cheap" and di == 2:
                    continue  # today nobody scored cheap's answers: no quality point, not 0%
                for metric, value in (("groundedness", grounded), ("invalid_citations", k)):
                    w.put("query_quality", {"query_id": qid, "metric": metric, "source": "local", "value": value,
                                            "recorded_at": ts})
    assert w.flush(10)
    w.close()
    with Server(settings) as url:
        api = httpx.get(f"{url}/v1/reports/quality", params={"days": 30}).json()
        assert len(api["rows"]) == 6
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            blocked = []
            page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
            page.on("pageerror", lambda e: blocked.append(str(e)))
            page.goto(f"{url}/dashboard")
            page.wait_for_selector("#chart-quality-days circle", state="attached")
            for chart, unit in (("#chart-quality-days", "(%)"), ("#chart-cost-days", "(USD)")):
                assert page.text_content(f"{chart} .y-title").endswith(unit)
                assert page.text_content(f"{chart} .x-title") == "days (UTC, 3 with queries)"
            grounded = page.locator("#chart-quality-days circle[data-key=groundedness]")
            assert grounded.count() == 5  # 2 variants x 3 days, less cheap's unscored day
            assert page.locator("#chart-quality-days circle[data-key=invalid_citation_rate]").count() == 5
            assert page.locator(f"#chart-quality-days circle[data-variant=cheap][data-day='{days[2]}']").count() == 0
            title = page.text_content(f"#chart-quality-days circle[data-variant=control][data-key=groundedness][data-day='{days[0]}'] title")
            assert title == f"control {days[0]} 90% (2 scored)"
            costs = page.locator("#chart-cost-days circle")
            assert costs.count() == 5  # cheap's unpriced day: no point (never $0)
            cheap = page.text_content(f"#chart-cost-days circle[data-variant=cheap][data-day='{days[0]}'] title")
            assert cheap == f"cheap {days[0]} {usd(0.0003)}"
            assert "unpriced, not $0" in page.inner_text("#chart-cost-days .legend")
            assert "nothing scored" in page.inner_text("#chart-quality-days .legend")
            boxes = [page.locator(c).bounding_box() for c in ("#chart-quality-days", "#chart-cost-days")]
            assert abs(boxes[0]["y"] - boxes[1]["y"]) < 5 and boxes[1]["x"] > boxes[0]["x"]  # side by side
            page.screenshot(path=str(tmp_path / "quality-days-1280.png"), full_page=True)
            page.set_viewport_size({"width": 760, "height": 900})
            fits_760(page, "#chart-cost-days")
            assert not blocked, blocked
            browser.close()


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (.ci/run installs it)")
def test_a_member_key_sees_its_own_queries_and_spend(tmp_path):
    """Opened with a member key, the page shows that key's user's queries and cost, never another's (whatever
    it filters by, in the page or its CSV), and says why the service-wide panels are not there."""
    from playwright.sync_api import expect, sync_playwright

    from rag_app.access import manage
    from rag_app.access.keys import KeySpec
    from tracing.ledger import LedgerWriter

    settings = make_settings(tmp_path, api_token="boot", answer_cache_size=0)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    w = LedgerWriter(settings.ledger_path)
    for i, (user, question) in enumerate((("ann", "股东会的职权有哪些？"), ("ann", "董事会由几人组成？"),
                                          ("bob", "bob 的秘密问题"))):
        ts = f"2026-12-0{i + 1}T10:00:00.000+00:00"
        w.put("queries", {"query_id": f"q{i}", "kind": "query", "status": "ok", "variant": "default", "mode": "llm",
                          "started_at": ts, "question": question, "origin": "live", "user_id": user, "api_key_id": user})
        w.put("stage_calls", {"query_id": f"q{i}", "stage": "generate", "status": "ok", "model": "m", "input_tokens": 10,
                              "cost_nano_usd": 250_000, "price_source": "bundled", "started_at": ts})
    assert w.flush(10)
    w.close()
    with Ledger.open(settings.ledger_path) as L:
        secret = manage.create(L, KeySpec.parse({"name": "ann"}), "test")
        for qid, user in (("q0", "ann"), ("q2", "bob")):  # both users marked an answer of their own wrong
            L.add_feedback(qid, user, -1, None, "2026-12-05T00:00:00+00:00")
    with Server(settings) as url:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1280, "height": 900}, accept_downloads=True)
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{url}/dashboard?token={secret}")
            page.wait_for_selector("#my-queries tbody tr")
            shown = page.inner_text("#my-queries")
            assert page.locator("#my-queries tbody tr").count() == 2 and "bob" not in shown and "股东会" in shown
            assert page.text_content("#t-my-cost") == usd(0.0005) and "member key" in page.text_content("#member-note")
            # the list's filters never widen a member's view: bob's wrong answer is not among ann's
            page.select_option("#f-quality", "marked_wrong")
            expect(page.locator("#my-queries tbody tr")).to_have_count(1)
            assert page.locator("#my-queries tbody tr").first.get_attribute("data-id") == "q0"
            with page.expect_download() as got:
                page.click("#q-csv")
            assert [r.split(",")[0] for r in Path(got.value.path()).read_text().splitlines()[1:]] == ["q0"]
            page.select_option("#f-quality", "")
            expect(page.locator("#my-queries tbody tr")).to_have_count(2)
            asked_for_bob = httpx.get(f"{url}/v1/queries", params={"user": "bob", "format": "csv"},
                                      headers={"Authorization": f"Bearer {secret}"})
            assert asked_for_bob.status_code == 200 and asked_for_bob.text.count("\n") == 1  # a header, no row
            page.locator("#my-queries tbody tr").first.click()
            page.wait_for_selector("text=query q1")
            assert not errors
            browser.close()


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (.ci/run installs it)")
def test_the_rewrite_stage_and_evaluation_spend_are_drawn(seeded):
    """#45: the rewrite lever's stage is a segment of each bar (stages come from the rows), and the judge's
    spend has a tile and a series beside each answer's cost (0.9.x: the dashboard showed 18% of a bill
    whose other 82% was the judge's)."""
    from playwright.sync_api import sync_playwright

    root, _ = seeded
    grades = Reply(content='{"faithfulness": 0.9, "relevance": 0.7, "reason": "ok"}', prompt_tokens=900,
                   completion_tokens=30)
    with FakeOpenAI() as llm, FakeOpenAI() as judge:
        judge.script = [grades, grades]
        settings = make_settings(root, openai_base_url=llm.base_url, answer_cache_size=0, query_rewrite=True,
                                 judge_model="gpt-4o-mini", judge_base_url=judge.base_url, judge_sample=1.0)
        server = Server(settings)
        with server as url, sync_playwright() as p:
            for q in ("股东会的职权有哪些？", "董事会由几人组成？"):
                assert httpx.post(f"{url}/v1/ask", json={"question": q}, timeout=HANG_S).status_code == 200
            server.server.config.app.state.svc.pool.drain()
            judged = httpx.get(f"{url}/v1/reports/summary").json()["evaluation_spend"]["cost_usd"]
            assert judged > 0 and len(judge.requests) == 2
            # the query list carries each answer's grading cost and every billed stage, the rewrite too
            listed = httpx.get(f"{url}/v1/queries").json()["queries"]
            assert round(sum(q["evaluation_cost_usd"] for q in listed), 9) == round(judged, 9)
            assert all(q["rewrite_tokens"] > 0 and q["rewrite_cost_usd"] is not None for q in listed)
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            page.goto(f"{url}/dashboard")
            page.wait_for_selector("#chart-stages rect", state="attached")
            assert page.locator("#chart-stages rect[data-stage=rewrite]").count() == 2
            assert "rewrite" in page.inner_text("#chart-stages .legend")
            assert page.inner_text("#t-evaluation") == usd(judged)
            assert page.locator("#chart-cost circle[data-series=evaluation_cost_usd]").count() == 2
            assert "evaluation" in page.inner_text("#chart-cost .legend")
            browser.close()


def launch(p):
    return p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])


def watch(page) -> list:
    """Script errors and CSP refusals on the page, collected (a test asserts none)."""
    errors: list = []
    page.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


@pytest.fixture(scope="module")
def experiments(tmp_path_factory):
    """Two days of traffic, hour by hour, through the real writer: `topn`, a split ramped from 10% to 50% after
    six hours (a move in the ledger), its treatment a third cheaper and as grounded; `shadow`, a shadow
    experiment whose treatment runs beside every answer."""
    from tests.unit.experiments.test_timeline import write_experiment

    root = tmp_path_factory.mktemp("experiments")
    settings = make_settings(root, answer_cache_size=0, experiments_file=root / "exp.json")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    (root / "exp.json").write_text(json.dumps({"variants": {"cheap": {"top_n": 3}, "shadowed": {"top_n": 2}}, "experiments": {
        "topn": {"control": "default", "treatment": "cheap", "rollout_pct": 10, "seed": "s",
                 "ramp": {"steps": [10, 50, 100], "min_queries_per_step": 15}},
        "shadow": {"control": "default", "treatment": "shadowed", "rollout_pct": 100, "seed": "s", "mode": "shadow"}}}))
    ledger = settings.ledger_path
    write_experiment(ledger, exp="topn", hours=48, share=lambda h: 0.1 if h < 6 else 0.5, ctrl_cost=150_000,
                     treat_cost=100_000, grounded=(0.86, 0.84), gap_hours=(30, 31), start="2026-03-01",
                     variants=("default", "cheap"), refusals=True)
    write_experiment(ledger, exp="shadow", hours=10, shadow=True, ctrl_cost=150_000, treat_cost=180_000, gap_hours=(),
                     start="2026-03-02", variants=("default", "shadowed"))
    with Ledger.open(ledger) as L:
        assert L.add_experiment_event({"experiment": "topn", "seq": 1, "at": "2026-03-01T06:00:00.000+00:00",
                                       "action": "advance", "from_pct": 10, "to_pct": 50,
                                       "reason": "each arm has 15 queries at 10% and no guardrail crossed"})
    return settings


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (.ci/run installs it)")
def test_the_experiment_page_draws_each_metric_over_time_with_its_band(experiments):
    """The effect of the primary metric over time inside its anytime-valid band (present, spanning the points
    that have an interval, a point per hour with data), the zero and margin lines, the ramp's move, the verdict
    at each point; a small chart per guardrail with the status the API gives; cost and groundedness per arm;
    every figure from the same API as `rag experiment compare --json`; tables within the page; in Chinese too."""
    from playwright.sync_api import sync_playwright

    with Server(experiments) as url, sync_playwright() as p:
        api = httpx.get(f"{url}/v1/experiments/topn", params={"over_time": "auto"}).json()
        s = api["over_time"]
        assert s["every"] == "hour" and len(s["at"]) == 46  # 48 hours, two without queries
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = watch(page)
        page.goto(f"{url}/dashboard#/experiment/topn")
        page.wait_for_selector("#chart-effect svg")
        assert page.inner_text("#verdict") == f"verdict: {api['verdict']}" and api["verdict"] == "promote"
        # a point per hour with data, in order, each at its hour
        pts = page.locator("#chart-effect circle.pt")
        assert pts.count() == len(s["at"])
        assert [pts.nth(i).get_attribute("data-at") for i in range(pts.count())] == s["at"]
        # the band: present, from the first point with an interval to the last point (the time axis' end)
        band = page.locator("#chart-effect polygon.band")
        assert band.count() == 1
        first = next(i for i, lo in enumerate(s["metrics"]["cost_per_query"]["low"]) if lo is not None)
        assert (band.get_attribute("data-from"), band.get_attribute("data-to")) == (
            str(Date(s["at"][first]) + HOUR_MS), str(Date(s["at"][-1]) + HOUR_MS))
        bb, last, one = band.bounding_box(), pts.last.bounding_box(), pts.nth(first).bounding_box()
        assert abs(bb["x"] + bb["width"] - (last["x"] + last["width"] / 2)) < 2  # ends at the last point
        assert abs(bb["x"] - (one["x"] + one["width"] / 2)) < 2  # begins where the interval does
        svg = page.locator("#chart-effect svg").bounding_box()
        assert bb["width"] > 0.85 * svg["width"] - 100  # spans the time axis (less its y labels)
        # the interval is ~10x narrower at the end than when it first appeared: the sequence tightens
        hi, lo = s["metrics"]["cost_per_query"]["high"], s["metrics"]["cost_per_query"]["low"]
        assert hi[-1] - lo[-1] < (hi[first] - lo[first]) / 3
        # zero, the margin promote must clear (-10% of control's cost), the ramp's move, a verdict per point
        assert page.locator("#chart-effect line.zero").count() == 1
        assert page.locator("#chart-effect line.margin").count() == 1 and "−10% of control" in page.text_content("#chart-effect")
        assert page.locator("#chart-effect line.ramp-move").count() == 1 and "→50%" in page.text_content("#chart-effect")
        segs = page.locator("#chart-effect rect.verdict-seg")
        assert [segs.nth(i).get_attribute("data-verdict") for i in range(segs.count())] == s["verdict"]
        assert "better" in page.inner_text("#chart-effect h3")
        # each guardrail: a small chart with its band and points, and the API's status
        guards = [m for m in api["metrics"] if m != "cost_per_query"]
        assert {"latency_ms", "error_rate", "groundedness", "invalid_citation_rate", "feedback_score", "refusal_rate",
                "judge_faithfulness"} <= set(guards)  # #44's guardrails beside the others
        for m in guards:
            box = page.locator(f".guard[data-metric={m}]")
            assert box.locator("circle.pt").count() == len(s["at"]), m
            assert box.locator("polygon.band").count() >= 1, m
            assert api["metrics"][m]["status"] in box.inner_text(), m
        # what each arm served, hour by hour: a point per arm per hour
        for chart in ("#chart-arm-cost", "#chart-arm-grounded"):
            for arm in ("control", "treatment"):
                assert page.locator(f"{chart} circle[data-key={arm}]").count() == len(s["at"]), (chart, arm)
        # the ramp's move and the verdict's history, as the API lists them
        assert page.locator("#ramp-moves tbody tr").count() == 1 and "10%" in page.inner_text("#ramp-moves")
        assert page.locator("#verdict-history tbody tr").count() == len(s["verdict_changes"])
        # the numbers are compare --json's: the metrics table's interval is the API's
        row = page.locator("#metrics tr[data-metric=cost_per_query]").inner_text()
        assert usd(api["metrics"]["cost_per_query"]["low"]).lstrip("-") in row
        # tables within the page: none scrolls sideways at 1280 px
        for table in ("#arms", "#metrics", "#verdict-history", "#ramp-moves"):
            assert page.evaluate(f"(() => {{ const t = document.querySelector('{table}'); return t.scrollWidth <= t.parentElement.clientWidth; }})()"), table
        assert readme_shot(page, "experiment-page.png", experiments.data_dir, 1250).stat().st_size > 30_000
        page.set_viewport_size({"width": 760, "height": 900})
        fits_760(page, "#chart-effect")
        page.set_viewport_size({"width": 1280, "height": 900})
        # a shadow experiment: its treatment is the shadow runs; no split to check
        page.goto(f"{url}/dashboard#/experiment/shadow")
        page.wait_for_selector("#chart-effect circle.pt")
        shadow = httpx.get(f"{url}/v1/experiments/shadow", params={"over_time": "auto"}).json()
        assert page.locator("#chart-effect circle.pt").count() == len(shadow["over_time"]["at"]) == 10
        assert "no split to check" in page.inner_text("#srm") and page.locator("#ramp-moves").count() == 0
        assert page.inner_text("#verdict") == f"verdict: {shadow['verdict']}"
        # in Chinese: the labels, the same figures
        page.goto(f"{url}/dashboard?lang=zh#/experiment/topn")
        page.wait_for_selector("#chart-effect circle.pt")
        assert "护栏指标" in page.inner_text("#view") and "主指标" in page.inner_text("#chart-effect h3")
        assert page.locator("#chart-effect circle.pt").count() == len(s["at"])
        page.screenshot(path=str(experiments.data_dir / "experiment-zh.png"), full_page=True)
        assert not errors, errors
        browser.close()


HOUR_MS = 3600_000


def Date(iso: str) -> int:  # noqa: N802 - JavaScript's Date.parse, in milliseconds
    from datetime import datetime

    return int(datetime.fromisoformat(iso).timestamp() * 1000)


@pytest.fixture(scope="module")
def scored_list(tmp_path_factory):
    """Queries of two users through two keys over three days, each answer with its own quality: grounded
    fully, partly (an unsupported claim), below half, a refusal (no groundedness), an invalid citation, judged,
    marked wrong or right, or never scored."""
    from tracing.ledger import LedgerWriter

    root = tmp_path_factory.mktemp("scored")
    settings = make_settings(root, answer_cache_size=0, api_token="boot")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    w = LedgerWriter(settings.ledger_path)
    kinds = {  # query -> (groundedness, invalid citations, refusal, judge faithfulness)
        "full": (1.0, 0, None, 0.9), "partly": (0.75, 0, None, None), "low": (0.25, 1, None, 0.2),
        "refused": (None, 0, 1, None), "badcite": (1.0, 2, None, None), "unscored": None}
    for i, (name, q) in enumerate(kinds.items()):
        for day in (1, 2, 3):
            qid = f"{name}-{day}"
            user = ("ann", "bob")[(i + day) % 2]
            ts = f"2026-12-0{day}T1{i}:00:00.000+00:00"
            w.put("queries", {"query_id": qid, "kind": "query", "status": "ok", "variant": ("default", "cheap")[day % 2],
                              "mode": "llm", "started_at": ts, "question": f"问题 {qid}", "origin": "live",
                              "user_id": user, "api_key_id": f"key-{user}"})
            w.put("stage_calls", {"query_id": qid, "stage": "generate", "status": "ok", "model": "m", "input_tokens": 10,
                                  "cost_nano_usd": 250_000, "price_source": "bundled", "started_at": ts})
            if q is None:
                continue
            grounded, invalid, refusal, faithful = q
            for source, metric, value in (("local", "groundedness", grounded), ("local", "invalid_citations", invalid),
                                          ("local", "refusal", refusal), ("judge", "faithfulness", faithful),
                                          ("judge", "judge_score", faithful)):
                if value is not None or metric == "groundedness":
                    w.put("query_quality", {"query_id": qid, "metric": metric, "source": source, "value": value,
                                            "recorded_at": ts})
    assert w.flush(10)
    w.close()
    with Ledger.open(settings.ledger_path) as L:
        L.add_feedback("partly-2", "ann", -1, "第二句没有依据", "2026-12-02T12:00:00+00:00")
        L.add_feedback("full-1", "bob", 1, None, "2026-12-01T12:00:00+00:00")
    return settings


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (.ci/run installs it)")
def test_the_query_list_shows_each_answers_quality_and_filters_by_it(scored_list, tmp_path):
    """Each row shows groundedness (or "refusal"), invalid citations, feedback and the judge's grade; each filter
    (marked wrong, unsupported claims, refusals, invalid citations, grounded below, variant, user, key, dates)
    shows exactly what the API returns for it, and the CSV download carries the list's own columns."""
    import csv
    import io

    from playwright.sync_api import expect, sync_playwright

    h = {"Authorization": "Bearer boot"}
    with Server(scored_list) as url, sync_playwright() as p:
        def ids(**params) -> list[str]:
            return [q["query_id"] for q in httpx.get(f"{url}/v1/queries", params={"limit": 50, **params}, headers=h).json()["queries"]]
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        errors = watch(page)
        page.goto(f"{url}/dashboard?token=boot")
        page.wait_for_selector("#queries tbody tr")
        rows = page.locator("#queries tbody tr")
        expect(rows).to_have_count(18)
        cells = lambda qid: page.locator(f"#queries tr[data-id='{qid}'] td").all_inner_texts()  # noqa: E731
        heads = page.locator("#queries th").all_inner_texts()
        col = {name: heads.index(name) for name in ("grounded", "bad cites", "feedback", "judge")}
        assert [cells("partly-2")[col[c]] for c in col] == ["75.0%", "0", "−1", "–"]
        assert [cells("low-3")[col[c]] for c in col] == ["25.0%", "1", "–", "20.0%"]
        assert cells("refused-1")[col["grounded"]] == "refusal"  # a refusal, not 0% grounded
        assert [cells("unscored-1")[col[c]] for c in col] == ["–", "–", "–", "–"]  # nothing recorded: never 0
        assert cells("full-1")[col["feedback"]] == "+1"

        def shows(expected: list[str]) -> None:
            expect(rows).to_have_count(len(expected))
            assert [rows.nth(i).get_attribute("data-id") for i in range(rows.count())] == expected

        for value, params in (("marked_wrong", {"marked_wrong": "true"}), ("unsupported", {"unsupported": "true"}),
                              ("refusal", {"refusal": "true"}), ("invalid_citations", {"invalid_citations": "true"})):
            expected = ids(**params)
            assert expected, value
            page.select_option("#f-quality", value)
            shows(expected)
        assert ids(marked_wrong="true") == ["partly-2"] and ids(refusal="true") == ["refused-3", "refused-2", "refused-1"]
        assert set(ids(unsupported="true")) == {f"{k}-{d}" for k in ("partly", "low") for d in (1, 2, 3)}
        page.select_option("#f-quality", "")
        page.fill("#f-grounded", "50")
        page.dispatch_event("#f-grounded", "change")
        shows(["low-3", "low-2", "low-1"])
        page.fill("#f-grounded", "")
        page.fill("#f-user", "ann")
        page.dispatch_event("#f-user", "change")
        shows(ids(user="ann"))
        page.fill("#f-key", "key-bob")  # ann's queries through bob's key: none
        page.dispatch_event("#f-key", "change")
        shows([])
        page.fill("#f-user", "")
        page.dispatch_event("#f-user", "change")
        shows(ids(key="key-bob"))
        page.fill("#f-key", "")
        page.fill("#f-from", "2026-12-02")
        page.fill("#f-to", "2026-12-02")
        page.dispatch_event("#f-to", "change")
        shows(ids(since="2026-12-02", until="2026-12-03"))
        assert all(i.endswith("-2") for i in ids(since="2026-12-02", until="2026-12-03"))
        page.select_option("#f-variant", "cheap")
        shows([])  # day 2 served the default
        page.select_option("#f-variant", "default")
        page.select_option("#f-quality", "unsupported")
        shows(["low-2", "partly-2"])
        # the CSV: the list's own columns, the same filters
        with page.expect_download() as got:
            page.click("#q-csv")
        text = Path(got.value.path()).read_text(encoding="utf-8")
        csv_rows = list(csv.DictReader(io.StringIO(text)))
        api = httpx.get(f"{url}/v1/queries", params={"variant": "default", "unsupported": "true", "since": "2026-12-02",
                                                      "until": "2026-12-03"}, headers=h).json()["queries"]
        assert [r["query_id"] for r in csv_rows] == ["low-2", "partly-2"] and list(csv_rows[0]) == list(api[0])
        assert {"groundedness", "refusal", "invalid_citations", "feedback_up", "feedback_down", "judge_score",
                "judge_faithfulness"} <= set(csv_rows[0])
        assert csv_rows[1]["feedback_down"] == "1" and csv_rows[0]["groundedness"] == "0.25"
        assert not errors, errors
        browser.close()
