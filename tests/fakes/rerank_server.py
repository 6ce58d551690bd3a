"""A real rerank HTTP server on a loopback socket (POST /v1/rerank), scripted per request.

Scores each document by the share of the query's characters it contains (deterministic, so
tests can predict the order). Each request takes the next step of the script:
    Usage(style="jina", total_tokens=123)     200 with `usage.total_tokens` (Jina / vLLM / SiliconFlow)
    Usage(style="cohere", search_units=2)      200 with `meta.billed_units.search_units` (Cohere)
    Usage(style="none")                        200 without any usage (the client must estimate)
    Usage(style="echo")                        200 with `usage.total_tokens` = characters of the query and
                                               documents: each request's own count (concurrency tests)
    Fail(500)                                  an error status
When the script is exhausted it answers like `default` (Usage("jina") unless set). Requests and headers are recorded.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Usage:
    style: str = "jina"
    total_tokens: int = 100
    search_units: int = 1


@dataclass
class Fail:
    code: int


def char_overlap(query: str, doc: str) -> float:
    q = set(query)
    return len(q & set(doc)) / max(len(q), 1)


class FakeRerank:
    def __init__(self):
        self.script: list = []
        self.default = Usage()
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                fake.requests.append(body)
                fake.headers.append(dict(self.headers))
                step = fake.script.pop(0) if fake.script else fake.default
                if self.path != "/v1/rerank":
                    return self._send(404, {"error": "not found"})
                if isinstance(step, Fail):
                    return self._send(step.code, {"error": {"message": "scripted failure"}})
                docs = body["documents"]
                scored = sorted(((i, char_overlap(body["query"], d)) for i, d in enumerate(docs)), key=lambda x: -x[1])
                out = {"model": body["model"],
                       "results": [{"index": i, "relevance_score": s} for i, s in scored[: body.get("top_n") or len(docs)]]}
                if step.style == "jina":
                    out["usage"] = {"total_tokens": step.total_tokens}
                elif step.style == "echo":
                    out["usage"] = {"total_tokens": len(body["query"]) + sum(len(d) for d in docs)}
                elif step.style == "cohere":
                    out["meta"] = {"billed_units": {"search_units": step.search_units}}
                self._send(200, out)

            def _send(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/rerank"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
