"""An alert-webhook receiver on a real local HTTP port that refuses its first requests (503 by default),
so a sender must retry; it records the bodies it accepted."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class WebhookReceiver:
    def __init__(self, refusals: tuple[int, ...] = (503,)):
        """`refusals`: the statuses of the first requests, one each (then 204 and the body is kept)."""
        self.events: list[dict] = []  # accepted bodies, in order
        self.calls = 0  # every request, the refused ones included
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                hook.calls += 1
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if hook.calls <= len(refusals):
                    self.send_response(refusals[hook.calls - 1])
                else:
                    hook.events.append(body)
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
