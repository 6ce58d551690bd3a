"""An alert-webhook receiver on a real local HTTP port that refuses its first request (503), so a
sender must retry; it records the bodies it accepted."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class WebhookReceiver:
    def __init__(self):
        self.events: list[dict] = []  # accepted bodies, in order
        self.calls = 0  # every request, the refused one included
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                hook.calls += 1
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if hook.calls == 1:
                    self.send_response(503)
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
