"""A real OpenAI-compatible HTTP server on a loopback socket, scripted per request.

Each request to /v1/chat/completions takes the next step of the script:
    Reply(content=..., prompt_tokens=..., completion_tokens=...)   200 with usage
    Reply(usage={...})                                             200 with that usage object verbatim
                                                                   (a provider's shape: USAGE_SHAPES)
    Reply(send_usage=False)                                        200 without usage (JSON or stream)
    Reply(stall_after=2, stall_s=3)                                stream 2 content chunks, then stall
    Reply(reset_after=2)                                           stream 2 content chunks, then reset the
                                                                   connection (TCP RST)
    Reply(end_after=2)                                             stream 2 content chunks, then close cleanly
                                                                   with no finish reason, usage or [DONE]
    Status(429, headers={"retry-after-ms": "20"})                  an error status
    Slow(seconds)                                                  sleeps before answering (client times out)
    Held(gate)                                                     answers once the test sets `gate` (an
                                                                   in-flight request, however busy the machine)
    Drop()                                                         closes the socket without answering
When the script is exhausted it answers 200 with what `responder(body)` returns (a Reply written from the
request itself: a scripted model that reads the prompt it is sent), or the default Reply. Streaming
requests get SSE: the content in chunks of CHUNK_CHARS characters, then (if the request asked with
stream_options.include_usage) a usage chunk.
"""
from __future__ import annotations

import json
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    content: str = "依据《中华人民共和国公司法》第五十七条[1]，一人有限责任公司适用本节规定。"
    prompt_tokens: int = 321
    completion_tokens: int = 45
    cached_tokens: int = 0
    usage: dict | None = None  # sent verbatim instead of the OpenAI shape built from the fields above
    send_usage: bool = True
    stall_after: int | None = None  # streaming: stop after this many content chunks ...
    stall_s: float = 0.0            # ... for this long (the client's read timeout cuts the stream)
    reset_after: int | None = None  # streaming: reset the connection after this many content chunks
    end_after: int | None = None    # streaming: end the body after this many content chunks, nothing more


CHUNK_CHARS = 8

# Each provider's documented usage object (what its OpenAI-compatible endpoint returns).
USAGE_SHAPES = {
    "openai": {"prompt_tokens": 2000, "completion_tokens": 300, "total_tokens": 2300,
               "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
               "completion_tokens_details": {"reasoning_tokens": 128, "audio_tokens": 0}},
    "deepseek": {"prompt_tokens": 1500, "completion_tokens": 200, "total_tokens": 1700,
                 "prompt_cache_hit_tokens": 1000, "prompt_cache_miss_tokens": 500,
                 "completion_tokens_details": {"reasoning_tokens": 64}},
    "dashscope": {"prompt_tokens": 3000, "completion_tokens": 100, "total_tokens": 3100,
                  "prompt_tokens_details": {"cached_tokens": 2048, "cache_creation_input_tokens": 512,
                                            "cache_creation": {"ephemeral_5m_input_tokens": 512},
                                            "cache_type": "ephemeral"}},
    "anthropic": {"input_tokens": 100, "output_tokens": 50, "cache_read_input_tokens": 2000,
                  "cache_creation_input_tokens": 400},
    "litellm": {"prompt_tokens": 2500, "completion_tokens": 50, "total_tokens": 2550,
                "prompt_tokens_details": {"cached_tokens": 2000}, "cache_read_input_tokens": 2000,
                "cache_creation_input_tokens": 400},
    # Kimi (Moonshot) reports its cache hits at the top level of usage
    "kimi": {"prompt_tokens": 3000, "completion_tokens": 100, "total_tokens": 3100, "cached_tokens": 2048},
}


@dataclass
class Status:
    code: int
    headers: dict = field(default_factory=dict)
    body: dict = field(default_factory=lambda: {"error": {"message": "scripted failure", "type": "server_error"}})


@dataclass
class Slow:
    seconds: float
    then: Reply = field(default_factory=Reply)


@dataclass
class Held:
    gate: threading.Event
    then: Reply = field(default_factory=Reply)


@dataclass
class Drop:
    pass


class FakeOpenAI:
    def __init__(self, responder=None):
        self.script: list = []
        self.responder = responder  # body -> Reply, when the script is exhausted
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with fake._lock:
                    fake.requests.append({"path": self.path, "body": body})
                    step = fake.script.pop(0) if fake.script else None
                if step is None:
                    step = (fake.responder(body) if fake.responder and not self.path.endswith("/embeddings")
                            else None) or Reply()
                if self.path.endswith("/embeddings"):
                    return self._json(200, {"object": "list", "model": body.get("model"), "data": [
                        {"object": "embedding", "index": i, "embedding": [0.1, 0.2, 0.3]}
                        for i, _ in enumerate(body.get("input") or [])],
                        "usage": {"prompt_tokens": 7, "total_tokens": 7}})
                if isinstance(step, Drop):
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if isinstance(step, Slow):
                    time.sleep(step.seconds)
                    step = step.then
                if isinstance(step, Held):
                    step.gate.wait()
                    step = step.then
                if isinstance(step, Status):
                    return self._json(step.code, step.body, step.headers)
                if body.get("stream"):
                    return self._sse(body, step)
                reply = {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                         "model": body.get("model"),
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": step.content},
                                      "finish_reason": "stop"}]}
                if step.send_usage:
                    reply["usage"] = _usage(step)
                self._json(200, reply)

            def _json(self, code, payload, headers=None):
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): that is the scenario

            def _sse(self, body, step: Reply):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": body.get("model")}
                pieces = [step.content[i:i + CHUNK_CHARS] for i in range(0, len(step.content), CHUNK_CHARS)]
                chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": p}, "finish_reason": None}]}
                          for p in pieces]
                chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                wants_usage = (body.get("stream_options") or {}).get("include_usage")
                if step.send_usage and wants_usage:
                    chunks.append({**base, "choices": [], "usage": _usage(step)})
                try:
                    for i, c in enumerate(chunks):
                        if step.stall_after is not None and i == step.stall_after:
                            self.wfile.flush()
                            time.sleep(step.stall_s)
                        if step.reset_after is not None and i == step.reset_after:
                            self.wfile.flush()
                            # SO_LINGER 0: close() sends RST, as a proxy or load balancer that drops it does
                            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                            self.connection.close()
                            self.close_connection = True
                            return
                        if step.end_after is not None and i == step.end_after:
                            self.wfile.flush()
                            self.close_connection = True
                            return
                        self.wfile.write(f"data: {json.dumps(c)}\n\n".encode())
                        self.wfile.flush()
                    self.wfile.write(b"data: [DONE]\n\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client cut the stream: that is the scenario
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def _usage(step: Reply) -> dict:
    if step.usage is not None:
        return step.usage
    return {"prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens,
            "total_tokens": step.prompt_tokens + step.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": step.cached_tokens}}
