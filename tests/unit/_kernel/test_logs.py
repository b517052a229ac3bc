"""ankka._kernel.logs: the one log format (text, JSON lines) and what a JSON line carries.

Every command writing it for real, with a canary key around:
tests/integration/test_secret_canary.py.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import sys
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from ankka._kernel import logs


def _record(message: str, *args: object, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("the reason")
        except ValueError:
            exc_info = sys.exc_info()
    return logging.LogRecord("ankka.gateway", logging.WARNING, __file__, 1, message, args, exc_info)


def test_a_json_line_has_timestamp_level_logger_and_message() -> None:
    line = logs.JsonFormatter().format(_record("model %r: %s", "small", "unavailable"))
    entry = json.loads(line)
    assert entry["level"] == "WARNING"
    assert entry["logger"] == "ankka.gateway"
    assert entry["message"] == "model 'small': unavailable"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["timestamp"])
    assert "trace_id" not in entry  # logged outside any span


def test_a_json_line_inside_a_span_names_the_trace_and_the_span() -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("work") as span:
        entry = json.loads(logs.JsonFormatter().format(_record("inside")))
    context = span.get_span_context()
    assert entry["trace_id"] == f"{context.trace_id:032x}"
    assert entry["span_id"] == f"{context.span_id:016x}"
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_a_traceback_stays_inside_its_one_json_line() -> None:
    line = logs.JsonFormatter().format(_record("failed", exc=True))
    assert "\n" not in line
    assert "ValueError: the reason" in json.loads(line)["exception"]


def test_a_text_line_has_the_timestamp_level_and_logger_first() -> None:
    line = logs.TextFormatter().format(_record("model %r", "small"))
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z WARNING ankka\.gateway: model 'small'", line
    )


@pytest.fixture
def restored() -> Iterator[None]:
    """Logging, the hook and ANKKA_LOG_FORMAT as they were (configure changes all three)."""
    root = logging.getLogger()
    handlers, level, hook = root.handlers[:], root.level, sys.excepthook
    before = os.environ.get(logs.ENV)
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    sys.excepthook = hook
    logs._format = "text"
    if before is None:
        os.environ.pop(logs.ENV, None)
    else:
        os.environ[logs.ENV] = before


def test_a_status_line_is_json_only_when_json_was_chosen(
    restored: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(logs.ENV, raising=False)
    out = io.StringIO()
    logs.configure("text")
    logs.say("ankka serve: listening on http://127.0.0.1:1", stream=out)
    logs.configure("json")
    logs.say("ankka serve: listening on http://127.0.0.1:2", stream=out, level="INFO")
    first, second = out.getvalue().splitlines()
    assert first == "ankka serve: listening on http://127.0.0.1:1"
    assert json.loads(second)["message"] == "ankka serve: listening on http://127.0.0.1:2"
    assert logs.configure(None) == "json", "the chosen format is passed on in the environment"


def test_an_unknown_format_in_the_environment_is_refused_naming_it(
    restored: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(logs.ENV, "yaml")
    with pytest.raises(SystemExit, match="ANKKA_LOG_FORMAT='yaml' is no log format"):
        logs.configure(None)


def test_http_clients_request_lines_are_left_out_but_their_warnings_kept(
    restored: None, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure("text")
    logging.getLogger("httpx2").info('HTTP Request: GET http://127.0.0.1:1/health "503"')
    logging.getLogger("httpx2").warning("a connection was reset")
    logging.getLogger("ankka.local").info("llama-server is loading")
    err = capsys.readouterr().err
    assert "GET http://127.0.0.1:1/health" not in err
    assert "a connection was reset" in err
    assert "llama-server is loading" in err
