"""A real OTLP/HTTP traces receiver on a loopback socket: decodes each protobuf
ExportTraceServiceRequest (opentelemetry-proto) into plain span dicts. `hang_s` makes it sit on
each request before answering (a collector that stopped responding)."""
from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def _value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def decode(body: bytes) -> list[dict]:
    req = ExportTraceServiceRequest.FromString(body)
    spans = []
    for rs in req.resource_spans:
        resource = {a.key: _value(a.value) for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                spans.append({
                    "name": s.name, "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                    "parent_id": s.parent_span_id.hex() or None, "kind": s.kind,
                    "start_ns": s.start_time_unix_nano, "end_ns": s.end_time_unix_nano,
                    "status_code": s.status.code, "status_message": s.status.message,
                    "attributes": {a.key: _value(a.value) for a in s.attributes},
                    "links": [(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
                    "resource": resource, "scope": ss.scope.name})
    return spans


class OtlpReceiver:
    def __init__(self, hang_s: float = 0.0):
        self.hang_s = hang_s
        self.spans: list[dict] = []
        self.requests = 0
        self.headers: list[dict] = []
        self._lock = threading.Lock()
        self._release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._lock:
                    receiver.requests += 1
                    receiver.headers.append(dict(self.headers))
                if receiver.hang_s:
                    receiver._release.wait(receiver.hang_s)
                    return  # never answers: the client's timeout is what ends it
                spans = decode(body) if self.path == "/v1/traces" else None
                if spans is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                with receiver._lock:
                    receiver.spans.extend(spans)
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def wait_for(self, n_spans: int, timeout_s: float = 120.0) -> list[dict]:
        """The spans so far, once `n_spans` arrived or `timeout_s` passed (a hang guard: it returns as soon
        as they are there, so a busy machine only makes it wait longer)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.spans) >= n_spans:
                    return list(self.spans)
            time.sleep(0.02)
        with self._lock:
            return list(self.spans)

    def release(self) -> None:
        """End every held request now, unanswered (the client sees the connection close)."""
        self._release.set()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._release.set()
        self.server.shutdown()
        self.server.server_close()
