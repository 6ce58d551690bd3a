"""The dashboard's API calls at volume: every request the home page, the query list's filters, a query's page
and the experiment page send, through the real FastAPI app, on a SQLite ledger of N queries every one of
which was scored (and every 20th given feedback).

    nice -n 10 python bench/dashboard_api.py [--queries 1000000] [--days 7] [--url sqlite:///PATH --reuse]

The ledger is bench/ledger_volume.py's (4 stage rows a query; 3 variants sticky per user, `topn` a 50/50
split of two of them) spread over `--days` days (7: the experiment page reads it hour by hour, its densest
case), plus bench/report_quality.py's quality rows (groundedness, invalid citations, retrieval confidence)
and feedback, then ANALYZE. Prints the seconds of each request (best of 2) and the size of its answer.
"""
from __future__ import annotations

import argparse
import sys
from datetime import date, timedelta
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import best_of, machine_line  # noqa: E402
from bench.ledger_volume import build, write_experiments  # noqa: E402
from bench.report_quality import add_quality  # noqa: E402
from rag_app.config.ledger_location import parse_ledger_url  # noqa: E402
from tracing.ledger import Ledger  # noqa: E402

PAGES = {
    "home": ["/v1/reports/summary", "/v1/reports/queries?last=500", "/v1/reports/quality?days=30",
             "/v1/reports/by?dim=user", "/v1/reports/by?dim=variant", "/v1/reports/by?dim=day", "/v1/review?limit=20",
             "/v1/budgets", "/v1/experiments", "/v1/queries?limit=50"],
    "query list filters": ["/v1/queries?limit=50&variant=top3", "/v1/queries?limit=50&user=user-7",
                           "/v1/queries?limit=50&key=nobody", "/v1/queries?limit=50&since={day}&until={next}",
                           "/v1/queries?limit=50&marked_wrong=true", "/v1/queries?limit=50&unsupported=true",
                           "/v1/queries?limit=50&refusal=true", "/v1/queries?limit=50&invalid_citations=true",
                           "/v1/queries?limit=50&grounded_below=0.5",
                           "/v1/queries?limit=50&variant=top3&marked_wrong=true&since={day}",
                           "/v1/queries?limit=50&offset=5000&unsupported=true",
                           "/v1/queries?format=csv&marked_wrong=true", "/v1/queries?format=csv&unsupported=true"],
    "a query": ["/v1/queries/{qid}"],
    "experiment": ["/v1/experiments/topn", "/v1/experiments/topn?over_time=auto", "/v1/experiments/topn?over_time=day"],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=200_000)
    ap.add_argument("--days", type=float, default=7, help="the days the queries are spread over")
    ap.add_argument("--url", help="sqlite:///PATH: build there (kept), or time it with --reuse")
    ap.add_argument("--reuse", action="store_true", help="--url names a ledger this bench built before")
    a = ap.parse_args()
    print(machine_line())
    tmp = Path(tempfile.mkdtemp(prefix="dashboard-api-"))
    target = parse_ledger_url(a.url, Path("unused")) if a.url else parse_ledger_url(f"sqlite:///{tmp}/ledger.sqlite",
                                                                                   Path("unused"))
    if not a.reuse:
        t = time.perf_counter()
        build(target, a.queries, days=a.days)
        with Ledger.open(target) as ledger:
            scored = add_quality(ledger)
        print(f"built {a.queries:,} queries over {a.days:g} days, {scored:,} scored, in {time.perf_counter() - t:.0f} s")
    data = tmp
    write_experiments(data)
    from fastapi.testclient import TestClient

    from rag_app.config.settings import Settings
    from rag_app.service.app import create_app

    settings = Settings(_env_file=None, data_dir=data, experiments_file=data / "exp.json",
                        ledger_url=target.url if target.dialect == "postgresql" else f"sqlite:///{target.path}")
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        first = c.get("/v1/queries", params={"limit": 1}).json()["queries"][0]  # the newest: its day, its page
        day = date.fromisoformat(first["started_at"][:10])
        fill = {"qid": first["query_id"], "day": day.isoformat(), "next": (day + timedelta(days=1)).isoformat()}
        for page, paths in PAGES.items():
            print(f"\n{page} (best of 2, s; answer bytes):")
            for path in paths:
                url = path.format(**fill)
                size = {}

                def get(url=url, size=size):
                    r = c.get(url)
                    assert r.status_code == 200, (url, r.status_code, r.text[:300])
                    size["bytes"] = len(r.content)
                s = best_of(get, repeat=2)
                print(f"  {url:62s} {s:7.3f} {size['bytes']:>10,d}")


if __name__ == "__main__":
    main()
