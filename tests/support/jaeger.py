"""Jaeger as the tests' real trace backend: OTLP over HTTP in, its query API out, on loopback.

The binary is built once per machine by ``scripts/jaeger.sh build`` (``make deps`` runs it)
into ``${ANKKA_CACHE:-~/.cache/ankka}/jaeger/bin/jaeger``; a test that needs it and finds none
fails naming that command, never skips. :func:`jaeger` starts one with an in-memory store and
only two listeners, each on a free loopback port: the OTLP HTTP receiver (what a server's
``OTEL_EXPORTER_OTLP_ENDPOINT`` names) and the query API (``/api/traces/{id}``), which
:meth:`Jaeger.trace` reads spans back from.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.eventually import eventually

__all__ = ["Jaeger", "Span", "binary", "jaeger"]

BUILD = "scripts/jaeger.sh build (make deps runs it)"

_CONFIG = """\
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{query}
    grpc:
      endpoint: 127.0.0.1:{query_grpc}
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp}
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"""


def binary() -> Path:
    cache = Path(os.environ.get("ANKKA_CACHE") or Path.home() / ".cache" / "ankka")
    found = cache / "jaeger" / "bin" / "jaeger"
    if not found.is_file():
        raise RuntimeError(f"Jaeger is not built ({found} is missing): run {BUILD}")
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Span:
    """One span as Jaeger's query API returns it, with its tags as a plain dict."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    service: str
    kind: str | None
    tags: dict[str, Any]
    start: int = 0  # microseconds since the epoch, as Jaeger gives it


def _spans(trace: dict[str, Any]) -> list[Span]:
    services = {key: p["serviceName"] for key, p in trace.get("processes", {}).items()}
    spans = []
    for raw in trace["spans"]:
        tags = {tag["key"]: tag["value"] for tag in raw.get("tags", [])}
        parents = [r["spanID"] for r in raw.get("references", []) if r["refType"] == "CHILD_OF"]
        spans.append(
            Span(
                trace_id=raw["traceID"],
                span_id=raw["spanID"],
                parent_id=parents[0] if parents else None,
                name=raw["operationName"],
                service=services.get(raw["processID"], ""),
                kind=tags.get("span.kind"),
                tags=tags,
                start=int(raw.get("startTime", 0)),
            )
        )
    return spans


@dataclass(frozen=True)
class Jaeger:
    otlp_endpoint: str  # OTEL_EXPORTER_OTLP_ENDPOINT for a process that exports to it
    query_url: str

    def env(self, service: str) -> dict[str, str]:
        """The environment that makes an ankka server export its spans here, promptly."""
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.otlp_endpoint,
            "OTEL_SERVICE_NAME": service,
            "OTEL_BSP_SCHEDULE_DELAY": "100",  # milliseconds between exports (default 5 s)
        }

    def spans(self, trace_id: str) -> list[Span]:
        """The spans Jaeger holds for ``trace_id`` (32 hex digits); [] when it has none."""
        answer = httpx.get(f"{self.query_url}/api/traces/{trace_id}", timeout=10)
        if answer.status_code == 404:
            return []
        answer.raise_for_status()
        data = answer.json().get("data") or []
        return [span for trace in data for span in _spans(trace)]

    def trace(
        self,
        trace_id: str,
        *,
        names: set[str],
        at_least: int = 0,
        caller: str | None = None,
        timeout: float = 30.0,
    ) -> list[Span]:
        """The trace's spans once every name in ``names`` is among them, there are at least
        ``at_least``, and, given the ``caller``'s span id, every span's parent is among them
        or is the caller's (fails at the deadline, naming what arrived). Each process exports
        its spans in its own batches, so a server's span can arrive before its client's:
        waiting for the parents keeps a test from reading the trace half-exported."""

        def arrived() -> list[Span]:
            spans = self.spans(trace_id)
            missing = names - {span.name for span in spans}
            assert not missing, f"missing {sorted(missing)}; have {[s.name for s in spans]}"
            assert len(spans) >= at_least, f"{len(spans)} of {at_least}: {[s.name for s in spans]}"
            if caller is not None:
                ids = {span.span_id for span in spans} | {caller}
                orphans = [(s.name, s.service) for s in spans if s.parent_id not in ids]
                assert not orphans, f"parents not (yet) in the trace: {orphans}"
            return spans

        return eventually(arrived, what=f"trace {trace_id} in Jaeger", timeout=timeout)


@contextmanager
def jaeger() -> Iterator[Jaeger]:
    """Start Jaeger on free loopback ports; yield where it listens; stop it afterwards."""
    path = binary()
    ports = {"otlp": _free_port(), "query": _free_port(), "query_grpc": _free_port()}
    with tempfile.TemporaryDirectory(prefix="ankka-jaeger-") as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_text(_CONFIG.format(**ports))
        log = (Path(tmp) / "jaeger.log").open("w")
        process = subprocess.Popen(
            [str(path), "--config", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp,
        )
        found = Jaeger(f"http://127.0.0.1:{ports['otlp']}", f"http://127.0.0.1:{ports['query']}")

        def ready() -> bool:
            if process.poll() is not None:
                output = (Path(tmp) / "jaeger.log").read_text()
                raise RuntimeError(f"Jaeger exited ({process.returncode}):\n{output}")
            try:
                services = httpx.get(f"{found.query_url}/api/services", timeout=2)
                receiver = httpx.post(
                    f"{found.otlp_endpoint}/v1/traces",
                    content=b"{}",
                    headers={"content-type": "application/json"},
                    timeout=2,
                )
            except httpx.TransportError:
                return False
            return services.status_code == 200 and receiver.status_code == 200

        try:
            eventually(ready, what="Jaeger's query API and OTLP receiver", timeout=60)
            yield found
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()
