"""A canary key sent to an upstream that quotes it back never reaches a caller, a log, the
metrics or the journal: on every preset, through ``ankka serve`` and through the gateway
(issue 13, defect 3).

The keyed stand-in answers 401 quoting the credential it was sent, as some real servers do; so
does the OAuth catalogue's authorization server (examples/mcp_oauth_catalog.py) for an MCP
server's client secret.
Two canaries: one shaped like an OpenAI key (hidden by its shape and because it is configured)
and one of no known shape (hidden only because it is configured).

With ``--log-format json`` every line every command writes is one JSON object with a
timestamp, level, logger and message (issue 28), and no canary is in any of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx
import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from ankka._kernel.errors import ModelError
from ankka.runtime.providers.base import ModelRequest
from ankka.runtime.providers.registry import providers_from_environment
from ankka.runtime.records.messages import UserMessage
from tests.support.eventually import eventually
from tests.support.processes import REPO, Server, ankka_command, start

pytestmark = pytest.mark.integration

STANDIN_KEY = "the-right-key-0123456789"
CANARIES = ("sk-canary-a1b2c3d4e5f6g7h8", "canary-8d2f6c1e9b7a")
HELLO = ModelRequest("", [UserMessage("Hello?")])


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    script = tmp_path_factory.mktemp("canary") / "script.json"
    script.write_text(
        json.dumps({"turns": [], "models": {"m-1": {"capabilities": ["completion"]}}})
    )
    server = start(
        ankka_command("standin", "--script", str(script), "--port", "0", "--api-key-env", "K"),
        env={"K": STANDIN_KEY},
    )
    yield server
    server.stop()


def assert_json_lines(output: str) -> list[dict[str, object]]:
    """Every line of ``output`` is a JSON object with the log format's four fields."""
    entries = []
    for line in output.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            pytest.fail(f"not a JSON line: {line!r}")
        assert isinstance(entry, dict), line
        assert {"timestamp", "level", "logger", "message"} <= entry.keys(), line
        assert str(entry["timestamp"]).endswith("Z"), line
        entries.append(entry)
    assert entries, "the command wrote nothing"
    return entries


def _settings(preset: str, url: str, key: str) -> dict[str, str]:
    base = url if preset == "anthropic" else f"{url}/v1"
    prefix = "ANKKA_MODEL_BRAIN_"
    values = {"PRESET": preset, "MODEL": "m-1", "URL": base, "API_KEY": key}
    return {prefix + k: v for k, v in values.items()}


@pytest.mark.parametrize("canary", CANARIES)
@pytest.mark.parametrize("preset", ["anthropic", "openai", "openai-compatible", "ollama"])
@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
async def test_no_preset_repeats_an_echoed_key(
    keyed: Server, preset: str, canary: str, streamed: bool
) -> None:
    provider = providers_from_environment(_settings(preset, keyed.url, canary))["brain"]

    async def call() -> None:
        if streamed:
            async for _ in provider.stream(HELLO):
                pass
        else:
            await provider.complete(HELLO)

    try:
        with pytest.raises(ModelError) as caught:
            await call()
    finally:
        await provider.aclose()
    assert caught.value.http_status == 401
    assert "different API key" in str(caught.value), "the upstream's words are still shown"
    assert canary not in str(caught.value)
    assert canary not in repr(caught.value.args)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_serve_keeps_an_echoed_key_out_of_answers_logs_metrics_and_journal(
    keyed: Server, tmp_path: Path, log_format: str
) -> None:
    canary = CANARIES[1]
    store = tmp_path / "sessions.sqlite3"
    env = _settings("openai-compatible", keyed.url, canary)
    env = {k.replace("_BRAIN_", "_DEFAULT_"): v for k, v in env.items()}
    server = start(
        ankka_command(
            "serve",
            "tests.integration.services:service",
            "--port",
            "0",
            "--store",
            f"sqlite:///{store}",
            "--access-log",
            "--log-format",
            log_format,
        ),
        env=env,
    )
    try:
        failed = httpx.post(
            f"{server.url}/v1/agents/polite/sessions/s", json={"message": "hi"}, timeout=30
        )
        streamed = httpx.post(
            f"{server.url}/v1/agents/streamer/sessions/s2", json={"message": "hi"}, timeout=30
        )
        metrics = httpx.get(f"{server.url}/metrics").text
    finally:
        output = server.stop()
    assert failed.status_code == 502
    assert "different API key" in failed.text
    for seen in (failed.text, streamed.text, metrics, output):
        assert canary not in seen
    journal = b"".join(p.read_bytes() for p in tmp_path.glob("sessions.sqlite3*"))
    assert canary.encode() not in journal
    if log_format == "json":
        messages = [str(e["message"]) for e in assert_json_lines(output)]
        assert any("listening on http://" in m for m in messages)
        assert any('"POST /v1/agents/polite/sessions/s HTTP/1.1" 502' in m for m in messages)


def _pem_private_key() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    return pem.decode()


def _oauth_credentials(credential: str, canary: str, issuer: str) -> dict[str, str]:
    """The ``_OAUTH*`` settings of a flow whose secret is ``canary``, each refused by the
    catalogue's authorization server (it knows no such client), which quotes what it got."""
    if credential == "client_secret":
        return {"OAUTH_CLIENT_SECRET": canary, "OAUTH_ISSUER": issuer}
    if credential == "private_key":  # sent only as the signature of a client assertion
        return {"OAUTH_PRIVATE_KEY": canary, "OAUTH_SIGNING_ALGORITHM": "ES256"} | {
            "OAUTH_ISSUER": issuer
        }
    return {  # an ID token, exchanged at an identity provider (the same /token here)
        "OAUTH": "identity_assertion",
        "OAUTH_CLIENT_SECRET": "the-registered-secret",
        "OAUTH_ISSUER": issuer,
        "OAUTH_IDP_TOKEN_ENDPOINT": f"{issuer}token",
        "OAUTH_IDP_CLIENT_ID": "the-idp-client",
        "OAUTH_ID_TOKEN": canary,
    }


@pytest.mark.parametrize("credential", ["client_secret", "private_key", "id_token"])
def test_serve_keeps_an_mcp_oauth_secret_an_authorization_server_echoes_out_of_everything(
    keyed: Server, tmp_path: Path, credential: str
) -> None:
    """An MCP server's authorization server refuses the client and quotes what it was sent
    (the client's secret, its signed assertion, the ID token it exchanges); the SDK's flow
    fails with that text and logs it. Neither the readiness answer, the turn's error, the
    metrics, the log (ankka's and the SDK's) nor the journal carries the secret: the client
    secret, the private key (a PEM of several lines) or the ID token."""
    canary = _pem_private_key() if credential == "private_key" else CANARIES[1]
    mcp = start(
        [
            sys.executable,
            str(REPO / "examples" / "mcp_oauth_catalog.py"),
            "--port",
            "0",
            "--client",
            "ankka:the-registered-secret",
            "--echo-credentials",
        ]
    )
    env = _settings("openai-compatible", keyed.url, STANDIN_KEY)
    env = {k.replace("_BRAIN_", "_DEFAULT_"): v for k, v in env.items()}
    prefix = "ANKKA_MCP_CATALOG_"
    oauth = {"OAUTH": "client_credentials", "OAUTH_CLIENT_ID": "ankka"}
    oauth |= _oauth_credentials(credential, canary, mcp.url.removesuffix("mcp"))
    env |= {f"{prefix}URL": mcp.url} | {prefix + k: v for k, v in oauth.items()}
    store = tmp_path / "sessions.sqlite3"
    command = ankka_command("serve", "examples.shop:service", "--port", "0")
    server = start([*command, "--store", f"sqlite:///{store}"], env=env)
    try:
        ready = eventually(
            lambda: httpx.get(f"{server.url}/readyz").json().get("missing"),
            what="readyz naming the refused server",
        )
        refused = httpx.post(
            f"{server.url}/v1/agents/shop/sessions/s", json={"message": "hi"}, timeout=30
        )
        metrics = httpx.get(f"{server.url}/metrics").text
    finally:
        output = server.stop()
        mcp_output = mcp.stop()
    assert "quoting what it sent" in mcp_output  # the server did echo it
    assert refused.status_code == 503
    if credential == "id_token":  # the identity provider's answer is not kept at all
        assert "refused the token exchange (401 invalid_client)" in refused.text
    else:
        assert "invalid_client" in refused.text
    if credential == "client_secret":
        assert "***" in json.dumps(ready)  # the echo reached ankka, and was replaced
    # A PEM's lines one by one too, and its body without them, as a log might wrap it.
    body = [line for line in canary.splitlines() if line and not line.startswith("-----")]
    pieces = {canary, *body, "".join(body)}
    journal = b"".join(p.read_bytes() for p in tmp_path.glob("sessions.sqlite3*"))
    for piece in pieces:
        for seen in (json.dumps(ready), refused.text, metrics, output):
            assert piece not in seen
        assert piece.encode() not in journal


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_the_gateway_keeps_an_echoed_key_out_of_its_answer_and_logs(
    keyed: Server, tmp_path: Path, log_format: str
) -> None:
    canary = CANARIES[1]
    models = tmp_path / "models.yaml"
    entry = {"name": "m-1", "kind": "ollama", "url": keyed.url, "api_key_env": "UPSTREAM_KEY"}
    models.write_text(yaml.safe_dump({"models": [entry]}))
    gateway = start(
        ankka_command(
            "gateway", "--models", str(models), "--insecure", "--host", "127.0.0.1", "--port", "0"
        ),
        env={"UPSTREAM_KEY": canary, "ANKKA_LOG_FORMAT": log_format},
    )
    try:
        eventually(
            lambda: httpx.get(f"{gateway.url}/readyz").status_code == 200,
            what="the gateway to probe its model",
        )
        refused = httpx.post(
            f"{gateway.url}/v1/chat/completions",
            json={"model": "m-1", "messages": [{"role": "user", "content": "hi"}]},
        )
        metrics = httpx.get(f"{gateway.url}/metrics").text
    finally:
        output = gateway.stop()
    assert refused.status_code == 401
    assert "different API key" in refused.json()["error"]["message"]
    for seen in (refused.text, metrics, output):
        assert canary not in seen
    if log_format == "json":
        assert_json_lines(output)


def _run(*args: str, env: dict[str, str], until: str | None = None) -> str:
    """Run an ankka command to its end; its output. A server (``until`` given) is stopped once
    it has written a line containing ``until``, however long its start takes on a loaded
    machine; 120 s is the bound either way."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ankka", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    lines: list[str] = []
    seen = threading.Event()

    def read(stream: IO[str]) -> None:
        for line in stream:
            lines.append(line)
            if until is not None and until in line:
                seen.set()
        seen.set()

    reader = threading.Thread(target=read, args=(process.stdout,), daemon=True)
    reader.start()
    seen.wait(timeout=120)
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)
    reader.join(timeout=30)
    return "".join(lines)


def test_every_other_command_writes_json_lines_without_a_secret(tmp_path: Path) -> None:
    """The commands without a server of their own here, each taken to where it writes: its
    error, its status, or (the operator) its retries against an unreachable API server. The
    canary is in their environment as a model key, a kubeconfig token and a state path's
    neighbour; none of them may write it."""
    canary = CANARIES[1]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": []}))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": canary}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    env = {
        **os.environ,
        "ANKKA_LOG_FORMAT": "json",
        "ANKKA_MODEL_DEFAULT_API_KEY": canary,
        "ANKKA_STATE": str(tmp_path / "state"),
        "KUBECONFIG": str(kubeconfig),
        "PYTHONUNBUFFERED": "1",
    }
    outputs = {
        "status": _run("status", env=env),
        "down": _run("down", env=env),
        "up": _run("up", "--port", "70000", env=env),
        "local-model": _run("local-model", "--check", "--port", "1", env=env),
        "approve": _run("approve", "t-1", "a-1", "--digest", "d", "-n", "lab", env=env),
        "standin": _run(
            "standin", "--script", str(script), "--port", "0", env=env, until="listening on"
        ),
        "operator": _run("operator", "--metrics-port", "0", env=env, until="will try again"),
    }
    for command, output in outputs.items():
        assert canary not in output, command
        entries = assert_json_lines(output)
        assert all(e["level"] in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL") for e in entries)
    messages = " ".join(str(e["message"]) for e in assert_json_lines(outputs["standin"]))
    assert "listening on http://" in messages
