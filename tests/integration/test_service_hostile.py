"""The service against hostile requests, over a real socket: no forged documents, bounded bodies,
no 500s, nothing of the server's layout in responses. No shared data: nothing here is indexed."""
from __future__ import annotations

import socket

import httpx
import pytest

from tests.conftest import make_settings
from tests.integration.test_service import Server


@pytest.fixture(scope="module")
def open_url(tmp_path_factory):
    with Server(make_settings(tmp_path_factory.mktemp("open"), max_request_mb=1)) as url:
        yield url


@pytest.fixture(scope="module")
def token_url(tmp_path_factory):
    with Server(make_settings(tmp_path_factory.mktemp("tok"), api_token="s3cret")) as url:
        yield url


def test_cross_site_browser_posts_are_refused(open_url):
    files = [("files", ("劳动合同法.md", "# 伪造\n\n第一条 假的。".encode(), "text/markdown"))]
    for headers in ({"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
                    {"Origin": "https://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "same-site"}):
        r = httpx.post(f"{open_url}/v1/ingest", files=files, headers=headers)
        assert r.status_code == 403 and "cross-site" in r.json()["detail"], headers
        assert httpx.post(f"{open_url}/v1/ask", json={"question": "x"}, headers=headers).status_code == 403
    # the dashboard's own requests and non-browser clients still work
    same = httpx.post(f"{open_url}/v1/ask", json={"question": ""}, headers={"Sec-Fetch-Site": "same-origin",
                                                                           "Origin": open_url})
    assert same.status_code == 422
    assert httpx.get(f"{open_url}/v1/queries", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 200


def test_host_header_outside_the_allow_list_is_refused(open_url):
    r = httpx.get(f"{open_url}/v1/queries", headers={"Host": "attacker.example"})
    assert r.status_code == 400 and "RAG_ALLOWED_HOSTS" in r.json()["detail"]
    port = open_url.rsplit(":", 1)[1]
    assert httpx.get(f"{open_url}/v1/queries", headers={"Host": f"localhost:{port}"}).status_code == 200


def test_allowed_hosts_setting_extends_the_list(tmp_path):
    with Server(make_settings(tmp_path, allowed_hosts="rag.example.org")) as url:
        assert httpx.get(f"{url}/healthz", headers={"Host": "rag.example.org"}).status_code == 200
        assert httpx.get(f"{url}/healthz", headers={"Host": "other.example.org"}).status_code == 400


def test_request_body_is_capped_before_it_is_read(open_url):
    # Content-Length over the cap: refused at once
    r = httpx.post(f"{open_url}/v1/ingest", files=[("files", ("big.md", b"x" * (2 * 2**20), "text/markdown"))])
    assert r.status_code == 413 and "RAG_MAX_REQUEST_MB" in r.json()["detail"]
    # no Content-Length (chunked): counted while it streams, refused past the cap
    host, port = open_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"POST /v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
                  b"Content-Type: multipart/form-data; boundary=b\r\n\r\n")
        part = b'--b\r\nContent-Disposition: form-data; name="files"; filename="big.md"\r\n\r\n'
        s.sendall(b"%x\r\n%s\r\n" % (len(part), part))
        chunk = b"y" * 65536
        try:
            for _ in range(64):  # 4 MB offered, 1 MB allowed
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except OSError:
            pass  # the server closed the connection: it stopped reading
        reply = s.recv(4096)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    # JSON endpoints take 1 MB at most
    assert httpx.post(f"{open_url}/v1/ask", content=b'{"question": "' + b"a" * 2**21 + b'"}',
                      headers={"Content-Type": "application/json"}).status_code == 413


def test_docs_follow_the_token(token_url):
    assert httpx.get(f"{token_url}/openapi.json").status_code == 401
    assert httpx.get(f"{token_url}/docs").status_code == 401
    assert httpx.get(f"{token_url}/openapi.json", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert httpx.get(f"{token_url}/openapi.json", params={"token": "s3cret"}).status_code == 200


def test_dashboard_sends_csp_and_frame_headers(open_url):
    r = httpx.get(f"{open_url}/dashboard")
    assert r.status_code == 200
    csp = r.headers["content-security-policy"]
    scripts = csp.split("script-src")[1].split(";")[0]
    assert "frame-ancestors 'none'" in csp and scripts.startswith(" 'self' 'sha256-") and "unsafe-inline" not in scripts
    assert r.headers["x-frame-options"] == "DENY"
    # its one script file ('self'): plain JavaScript, never sniffed; no other name, no path, is served
    js = httpx.get(f"{open_url}/dashboard/experiment.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert js.headers["x-content-type-options"] == "nosniff" and "function experimentView" in js.text
    for name in ("dashboard.html", "..%2fapp.py", "x.js", "%2e%2e%2fdashboard.html"):
        assert httpx.get(f"{open_url}/dashboard/{name}").status_code == 404, name


def test_non_ascii_tokens_are_a_401_not_a_500(token_url):
    for headers, params in (({"Authorization": "Bearer 密码".encode()}, {}),
                            ({}, {"token": "密码"}), ({"Authorization": "Bearer s3crét".encode()}, {})):
        for path in ("/v1/queries", "/dashboard"):
            r = httpx.get(f"{token_url}{path}", headers=headers, params=params)
            assert r.status_code == 401, (path, headers, params, r.text)


@pytest.mark.parametrize("body,field", [
    ({"question": "   \n\t "}, "question"),
    ('{"question": "\\ud800 劳动合同"}', "question"),
    ({"question": "x", "user_id": "\udc80"}, "user_id"),
    ({"question": "x" * 9000}, "question"),
    ({"question": "x" * 900_000}, "question"),  # 0.9 MB: under the 1 MB JSON cap, so it reaches validation
    ({"question": "x", "scopes": {"docs": ["a.md"]}}, "scopes"),  # a misspelled key was ignored: answered unscoped
    ({"question": "x", "scope": {"doc": ["a.md"]}}, "doc"),
])
def test_bad_questions_are_a_422_naming_the_field(open_url, body, field):
    if isinstance(body, str):
        r = httpx.post(f"{open_url}/v1/ask", content=body.encode(), headers={"Content-Type": "application/json"})
    else:
        import json
        r = httpx.post(f"{open_url}/v1/ask", content=json.dumps(body).encode(),
                       headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert any(field in d["loc"] for d in r.json()["detail"])
    assert len(r.content) < 2000  # the input is never echoed back


@pytest.mark.parametrize("path,params,field", [
    ("/v1/queries", {"offset": 2**63}, "offset"),
    ("/v1/queries", {"limit": 2**64}, "limit"),
    ("/v1/reports/queries", {"last": 2**63}, "last"),
    ("/v1/reports/queries", {"last": 10_001}, "last"),  # the rows one request may read are bounded
    ("/v1/reports/summary", {"last": 2**63}, "last"),
    ("/v1/queries", {"since": "garbage"}, "since"),
    ("/v1/queries", {"until": "yesterday"}, "until"),
])
def test_out_of_range_query_params_are_a_422_naming_the_field(open_url, path, params, field):
    r = httpx.get(f"{open_url}{path}", params=params)
    assert r.status_code == 422, r.text
    assert any(field in d["loc"] for d in r.json()["detail"])


def test_a_page_says_the_limit_and_offset_it_served(open_url):
    for asked, served in (({"limit": -1, "offset": -5}, (1, 0)), ({"limit": 10**9}, (500, 0))):
        body = httpx.get(f"{open_url}/v1/queries", params=asked).json()
        assert (body["limit"], body["offset"]) == served


def test_an_unknown_query_id_is_not_echoed_whole(open_url):
    r = httpx.get(f"{open_url}/v1/queries/{'a' * 5000}")
    assert r.status_code == 404 and len(r.content) < 300


def test_since_accepts_an_iso_date(open_url):
    r = httpx.get(f"{open_url}/v1/queries", params={"since": "2026-01-01", "until": "2030-01-01T00:00:00Z"})
    assert r.status_code == 200 and r.json()["total"] == 0


def test_rejected_uploads_are_removed_and_long_names_do_not_lose_the_batch(tmp_path):
    long_name = "劳" * 100 + ".md"  # 302 bytes in UTF-8: the file system refuses it as a name
    law = "# 中华人民共和国劳动法\n\n第一条 为了保护劳动者的合法权益，制定本法。\n".encode()
    files = [("files", (long_name, b"", "text/markdown")),
             ("files", ("evil.exe", b"MZ", "application/octet-stream")),
             ("files", ("blank.txt", b"   \n", "text/plain")),
             ("files", ("法" * 100 + ".md", law, "text/markdown")),  # long name, good content: indexed
             ("files", ("good.md", law.replace("劳动法".encode(), "工会法".encode()), "text/markdown"))]
    with Server(make_settings(tmp_path)) as url:
        r = httpx.post(f"{url}/v1/ingest", files=files, timeout=300)
    assert r.status_code == 200, r.text
    kept = sorted(p.name for p in (tmp_path / "data" / "uploads").iterdir())
    assert len(kept) == 2 and "good.md" in kept and len(kept[0].encode()) <= 200  # nothing rejected stays
    rows = r.json()["files"]
    assert [f["status"] for f in rows] == ["error"] * 3 + ["written"] * 2  # the batch went on
    assert "empty" in rows[0]["error"] and "unsupported" in rows[1]["error"] and "empty" in rows[2]["error"]
    for row in rows:  # the server's directory layout is never shown
        assert "/tmp/" not in (row["error"] or "") and "uploads" not in (row["error"] or "")
