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
from rag_app.comparison import compare_live
from rag_app.cost_render import usd
from rag_app.experiments import ExperimentConfig
from tests.conftest import LAWS, make_settings
from tests.fakes.openai_server import FakeOpenAI, Status
from tests.integration.test_service import Server
from tracing.ledger import Ledger
from rag_app.service.app import api_key_id

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


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
    from playwright.sync_api import sync_playwright

    root, cfg = seeded
    shots = Path(os.environ.get("DASHBOARD_SCREENSHOTS", root / "shots"))
    shots.mkdir(parents=True, exist_ok=True)
    with FakeOpenAI() as llm:
        llm.script = [Status(429, headers={"retry-after-ms": "5"})]  # one retried attempt in the ledger
        settings = make_settings(root, openai_base_url=llm.base_url, experiments_file=cfg, experiment="topn",
                                 llm_retry_base_s=0.01, api_token="tok")
        with Server(settings) as url:
            h = {"Authorization": "Bearer tok"}
            for i in range(12):
                r = httpx.post(f"{url}/v1/ask", headers=h, timeout=60,
                               json={"question": ["股东会的职权有哪些？", "一人有限责任公司是什么？", "董事会由几人组成？"][i % 3],
                                     "user_id": f"user-{i}"})
                assert r.status_code == 200, r.text
            with Ledger.open(settings.ledger_path) as ledger:
                totals = ledger.report().totals
                rows = ledger.report().queries
                exp = compare_live(ledger, ExperimentConfig.load(cfg).experiments["topn"])
                by_user = ledger.by("user")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run"])
                page = browser.new_page(viewport={"width": 1300, "height": 900})
                assert page.goto(f"{url}/dashboard").status == 401  # the token is required
                page.goto(f"{url}/dashboard?token=tok")
                page.wait_for_selector("#queries tbody tr")
                assert page.inner_text("#t-queries") == str(totals["queries"]) == "12"
                assert page.inner_text("#t-cost") == usd(totals['cost_usd'])
                assert page.inner_text("#t-waste") == usd(totals['retry_timeout_waste_usd'])
                assert page.inner_text("#t-unpriced") == f"{totals['unpriced_rows']} rows"
                assert page.locator("#queries tbody tr").count() == 12
                assert page.locator("#chart-stages rect").count() == 12 * 4  # a bar segment per stage per query
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
                page.screenshot(path=str(shots / "dashboard.png"), full_page=True)
                # filter by variant, then sort by cost
                page.select_option("#f-variant", "top3")
                n_top3 = sum(r["variant"] == "top3" for r in rows)
                assert page.locator("#queries tbody tr").count() == n_top3
                page.select_option("#f-variant", "")
                page.click("th[data-key=cost_usd]")
                # click into the query that had the 429: its retry and the success are both listed
                retried = next(r for r in rows if r["retries"])
                page.click(f"tr[data-id='{retried['query_id']}']")
                page.wait_for_selector("#stages tbody tr")
                text = page.inner_text("#stages")
                assert "retry" in text and text.count("generate") == 2
                assert page.inner_text("#q-cost") == usd(retried['cost_usd'])
                page.screenshot(path=str(shots / "query.png"), full_page=True)
                # the experiment page shows compare's numbers and verdict
                page.goto(f"{url}/dashboard?token=tok#/experiment/topn")
                page.wait_for_selector("#verdict")
                assert page.inner_text("#verdict") == f"verdict: {exp['verdict']}"
                control = page.locator("tr[data-arm=control]").inner_text()
                assert str(exp["arms"]["control"]["queries"]) in control
                page.screenshot(path=str(shots / "experiment.png"), full_page=True)
                browser.close()
    assert (shots / "dashboard.png").stat().st_size > 10_000
