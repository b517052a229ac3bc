"""A server signalled the moment it says where it listens stops cleanly: SIGTERM sent as its
"listening on" line is read (the reader is woken by that very write) is neither lost (the
server would serve on, never stopping) nor met by the default disposition (the process killed
by the signal, its store and MCP sessions never closed). Each command is started and
signalled a few times, since the window is the time between the line and the server's own
handlers; before the fix a loaded machine lost or died on that signal about two rounds in
three."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.gateway.conftest import write_models
from tests.support.processes import REPO

pytestmark = pytest.mark.integration

ROUNDS = 4


def commands(tmp: Path) -> dict[str, list[str]]:
    models = tmp / "models.yaml"
    write_models(models, [])
    store = f"sqlite:///{tmp / 'store.sqlite3'}"
    script = tmp / "script.json"
    script.write_text('[{"text": "never asked"}]')
    return {
        "serve": ["serve", "examples.weather", "--port", "0", "--store", store],
        "gateway": ["gateway", "--models", str(models), "--insecure", "--port", "0"],
        "gateway-uvicorn": [
            *("gateway", "--models", str(models), "--insecure", "--port", "0"),
            *("--server", "uvicorn"),
        ],
        "standin": ["standin", "--script", str(script), "--port", "0"],
    }


def signalled_at_listening(arguments: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Start ``ankka ARGUMENTS``, send SIGTERM as soon as its listening line is read, and
    return its exit status and output."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ankka", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=REPO,
    )
    seen: list[str] = []
    try:
        assert process.stdout is not None
        for _ in range(10_000):  # bounded: a few lines, then the listening line
            line = process.stdout.readline()
            seen.append(line)
            if not line or "listening on" in line:
                break
        assert "listening on" in seen[-1], "".join(seen)
        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=60)
    except BaseException:
        process.kill()
        process.communicate()
        raise
    return process.returncode, "".join(seen) + rest


@pytest.mark.parametrize("command", ["serve", "gateway", "gateway-uvicorn", "standin"])
def test_a_sigterm_sent_as_the_listening_line_is_read_stops_the_server_cleanly(
    command: str, tmp_path: Path
) -> None:
    arguments = commands(tmp_path)[command]
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("ANKKA_", "OTEL_"))}
    env = {
        **inherited,
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",
        "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
        "ANKKA_MODEL_DEFAULT_URL": "http://127.0.0.1:9/v1",  # never called
        "ANKKA_MODEL_DEFAULT_MODEL": "standin",
    }
    for round_ in range(ROUNDS):
        status, output = signalled_at_listening(arguments, env)
        assert status == 0, f"round {round_}: exit status {status}\n{output}"
        assert "Traceback" not in output, output
