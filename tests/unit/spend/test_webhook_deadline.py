"""A receiver that trickles its answer holds one delivery until RAG_ALERT_WEBHOOK_DEADLINE_S, never the
alerts behind it (0.7.0: httpx's read timeout restarts at every byte, so one trickle held them all)."""
from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from rag_app.spend.webhook import Webhook


class Trickler:
    """Answers its first request one byte every 0.3 s (for up to 20 s); the others at once with 204."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"
        self.bodies: list[dict] = []
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn, self.connections == 1), daemon=True).start()

    def _answer(self, conn, trickle):
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, body = data.split(b"\r\n\r\n", 1)
            length = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0].split(b":")[1])
            while len(body) < length:
                body += conn.recv(65536)
            if not trickle:
                self.bodies.append(json.loads(body))
                conn.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            end = time.monotonic() + 20
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"x" * 1000:
                if time.monotonic() > end:
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return
                time.sleep(0.3)

    def close(self):
        self.sock.close()


@pytest.mark.timeout(60)
def test_a_trickling_receiver_holds_one_delivery_until_the_deadline_not_the_next_alerts():
    rx = Trickler()
    hook = Webhook(rx.url, tries=1, timeout_s=5.0, deadline_s=1.0)
    for i in range(3):
        hook.send(None, {"event": f"e{i}"})
    hook.wait()
    hook.close()
    rx.close()
    assert (hook.sent, hook.failed, hook.abandoned) == (2, 1, 1)
    assert [b["event"] for b in rx.bodies] == ["e1", "e2"]  # the alerts behind the trickle went
