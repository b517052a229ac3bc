"""`ankka serve` listens before it imports what no request has needed yet: the model SDKs
(``openai`` and ``anthropic`` at a configured model's first call), Kubernetes' client, MCP's
SDK without a declared server, OpenTelemetry's SDK with tracing off, the a2a-sdk's server (at
the first A2A request) and with it ``httpx``, the push webhooks' transport (at the first
delivery), delegation's followers without a peer, YAML without an access file. Judged by what
a real ``ankka serve`` imported before its "listening" line (``python -X importtime``), not by
time."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.processes import REPO

IMPORTED = re.compile(r"import time:\s+\d+ \|\s+\d+ \| \s*(\S+)")
_SETTINGS = ("ANKKA_", "OTEL_", "KUBERNETES_")
NOT_AT_START = (
    "openai",
    "anthropic",
    "kubernetes",
    "kopf",
    "mcp",
    "opentelemetry.sdk",
    # Delegation's followers, with no peer nor remote A2A agent configured:
    "ankka.runtime.drivers.tasks.remote",
    "ankka.runtime.providers.a2a_remote",
    # The a2a-sdk's server (its routes, request handlers, SQLAlchemy, httpx): at the first
    # A2A request (ankka/runtime/serve/a2a/mount.py).
    "a2a.server",
    "ankka.runtime.serve.a2a.routes",
    "ankka.runtime.serve.a2a.handler",
    "httpx",
    "sqlalchemy",
    "httpcore2",  # the push webhooks' transport: at the first delivery
    "yaml",  # an --access-file's
)
MODEL = {
    "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
    "ANKKA_MODEL_DEFAULT_URL": "http://127.0.0.1:9/v1",  # never called: no request is made
    "ANKKA_MODEL_DEFAULT_MODEL": "standin",
}


def imported_before_listening(store: Path) -> set[str]:
    command = [sys.executable, "-X", "importtime", "-m", "ankka", "serve", "examples.weather"]
    command += ["--port", "0", "--store", f"sqlite:///{store}"]
    # Only this test's settings: one an earlier test left in os.environ (tracing, a cluster's
    # address, an MCP server) would make the server import what it then needs.
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(_SETTINGS)}
    env = {**inherited, **MODEL, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO
    )
    modules: set[str] = set()
    output: list[str] = []
    try:
        assert process.stdout is not None
        for _ in range(100_000):  # bounded: an import line each, then the listening line
            line = process.stdout.readline()
            if not line or "listening on" in line:
                break
            output.append(line)
            match = IMPORTED.match(line)
            if match:
                modules.add(match.group(1))
        assert "listening on" in line, "".join(output)[-3000:]
    finally:
        process.terminate()
        try:  # read what it still writes, so a full pipe cannot hold it up as it stops
            process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
    return modules


def test_serve_listens_before_importing_sdks_no_request_has_needed(tmp_path: Path) -> None:
    modules = imported_before_listening(tmp_path / "store.sqlite3")
    assert "ankka.runtime.providers.chat_completions" in modules  # the model was configured
    assert "uvicorn" in modules  # and the server is up
    early = {m for m in modules if any(m == n or m.startswith(n + ".") for n in NOT_AT_START)}
    assert not early


PROBE = """
import json, sys
from ankka.runtime.providers.registry import providers_from_environment
providers = providers_from_environment(dict(MODEL))
before = "openai" in sys.modules
providers["default"]._transport.client  # the first call builds the SDK's client
print(json.dumps([before, "openai" in sys.modules]))
"""


def probed(code: str) -> object:
    """What ``code``, run in a fresh interpreter, printed last (as JSON)."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_configured_model_imports_openai_at_its_first_use_only() -> None:
    assert probed(f"MODEL = {MODEL!r}\n{PROBE}") == [False, True]


ANTHROPIC_PROBE = """
import json, sys
from ankka.runtime.providers.registry import providers_from_environment
providers = providers_from_environment({
    "ANKKA_MODEL_CLAUDE_PRESET": "anthropic",
    "ANKKA_MODEL_CLAUDE_MODEL": "claude-sonnet-4-5",
    "ANKKA_MODEL_CLAUDE_API_KEY": "sk-ant-not-a-key",
})
before = "anthropic" in sys.modules
providers["claude"]._client  # the first call builds the SDK's client
print(json.dumps([before, "anthropic" in sys.modules]))
"""


def test_a_configured_anthropic_model_imports_its_sdk_at_its_first_use_only() -> None:
    assert probed(ANTHROPIC_PROBE) == [False, True]
