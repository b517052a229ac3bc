"""A webhook receiver on loopback for the push notification tests: a real HTTP server (the
standard library's, in a thread) that keeps what it is sent and answers 2xx, or a status the
test asks for to make the sender retry."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.http_reply import in_thread

__all__ = ["Received", "Webhook", "webhook"]


@dataclass(frozen=True, slots=True)
class Received:
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Webhook:
    url: str
    received: list[Received] = field(default_factory=list)
    fail_next: int = 0  # answer this many requests 503 before answering 200 again
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bodies(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r.body for r in self.received]


@contextmanager
def webhook() -> Iterator[Webhook]:
    hook = Webhook("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            data = json.loads(self.rfile.read(length) or b"{}")
            with hook.lock:
                failing = hook.fail_next > 0
                if failing:
                    hook.fail_next -= 1
                else:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    hook.received.append(Received(headers, data))
            self.send_response(503 if failing else 200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    with in_thread(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as server:
        hook.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        yield hook
