"""ankka._kernel.tracing: when the OTEL_* environment turns tracing on, what it refuses, and the
server span every request gets (the caller's trace continued, named by route, no exception
text recorded). Spans are caught by the SDK's in-memory exporter on a provider of the test's
own; the gateway's and runtime's spans in a real backend: tests/integration/gateway/test_tracing.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from ankka._kernel import tracing
from ankka._kernel.errors import ConfigurationError

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        (ENDPOINT, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({**ENDPOINT, "OTEL_SDK_DISABLED": "true"}, False),
        ({**ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
    ],
)
def test_tracing_is_on_only_when_the_environment_asks(environ: dict[str, str], on: bool) -> None:
    assert tracing.enabled_by(environ) is on


def test_off_means_no_provider_at_all() -> None:
    assert tracing.from_environment("ankka-test", {}) is None


def test_an_exporter_ankka_has_not_is_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match=r"OTEL_TRACES_EXPORTER='zipkin'.*otlp"):
        tracing.enabled_by({"OTEL_TRACES_EXPORTER": "zipkin"})


def test_otlp_over_grpc_is_refused_saying_what_to_set() -> None:
    environ = {**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    with pytest.raises(ConfigurationError, match="http/protobuf"):
        tracing.from_environment("ankka-test", environ)


def test_header_lines_are_empty_while_tracing_is_off() -> None:
    assert tracing.header_lines() == b""


Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def _spans() -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), exporter


async def _call(app: Any, path: str, headers: list[tuple[bytes, bytes]] | None = None) -> int:
    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "scheme": "http",
        "query_string": b"",
        "headers": headers or [],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
        "http_version": "1.1",
    }
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return int(sent[0]["status"])


def _app() -> Starlette:
    async def turn(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    async def broken(request: Request) -> PlainTextResponse:
        raise ValueError("the key sk-secret-123 was refused")

    return Starlette(
        routes=[
            Route("/v1/agents/{agent}/sessions/{session}", turn, methods=["POST"]),
            Route("/broken", broken, methods=["POST"]),
            Route("/healthz", turn, methods=["POST"]),
        ]
    )


async def test_a_request_continues_the_callers_trace_in_a_server_span_named_by_route() -> None:
    tracer, exporter = _spans()
    app = tracing.ServerSpans(_app(), tracer)
    header = f"00-{TRACE}-{PARENT}-01".encode()
    status = await _call(app, "/v1/agents/a/sessions/s1", [(b"traceparent", header)])
    assert status == 200
    (span,) = exporter.get_finished_spans()
    assert span.name == "POST /v1/agents/{agent}/sessions/{session}"
    assert span.kind is SpanKind.SERVER
    assert f"{span.context.trace_id:032x}" == TRACE
    assert span.parent is not None and f"{span.parent.span_id:016x}" == PARENT
    assert span.attributes is not None
    assert span.attributes["http.route"] == "/v1/agents/{agent}/sessions/{session}"
    assert span.attributes["http.response.status_code"] == 200
    assert span.attributes["url.path"] == "/v1/agents/a/sessions/s1"


async def test_a_request_without_a_traceparent_starts_a_trace() -> None:
    tracer, exporter = _spans()
    await _call(tracing.ServerSpans(_app(), tracer), "/v1/agents/a/sessions/s1")
    (span,) = exporter.get_finished_spans()
    assert span.parent is None


async def test_probes_and_scrapes_are_not_traced() -> None:
    tracer, exporter = _spans()
    await _call(tracing.ServerSpans(_app(), tracer), "/healthz")
    assert exporter.get_finished_spans() == ()


async def test_a_failure_is_its_type_never_its_text() -> None:
    tracer, exporter = _spans()
    with pytest.raises(ValueError, match="sk-secret"):
        await _call(tracing.ServerSpans(_app(), tracer), "/broken")
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None and span.attributes["error.type"] == "ValueError"
    assert span.events == ()  # no exception event: its message quotes what it was given
    assert "sk-secret" not in str(span.to_json())


async def test_a_fixed_path_names_the_span_when_the_app_has_no_router() -> None:
    tracer, exporter = _spans()

    async def bare(scope: Any, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 503, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    app = tracing.ServerSpans(bare, tracer, routes={"/v1/chat/completions"})
    await _call(app, "/v1/chat/completions")
    await _call(app, "/v1/chat/completions/../../x")
    named, unnamed = exporter.get_finished_spans()
    assert named.name == "POST /v1/chat/completions"
    assert named.status.status_code is StatusCode.ERROR
    assert named.attributes is not None and named.attributes["error.type"] == "503"
    assert unnamed.name == "POST"
