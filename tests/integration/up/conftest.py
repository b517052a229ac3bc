"""``ankka up`` as a real process: started with free ports and a private state directory."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ankka.local.local_model import free_port
from tests.support.processes import REPO, ankka_command

__all__ = ["Up", "free_port", "mtls", "start_up"]


def mtls(state: Path) -> ssl.SSLContext:
    """The runtime's own client certificate, as any platform caller would present it."""
    tls = state / "tls" / "runtime"
    context = ssl.create_default_context(cafile=str(tls / "ca.crt"))
    context.load_cert_chain(str(tls / "tls.crt"), str(tls / "tls.key"))
    return context


@dataclass
class Up:
    process: subprocess.Popen[str]
    state: Path
    port: int
    gateway_port: int
    model_port: int
    output: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def text(self) -> str:
        return "".join(self.output)

    def record(self) -> dict[str, object]:
        data: dict[str, object] = json.loads((self.state / "run.json").read_text())
        return data

    def pids(self) -> list[int]:
        parts = self.record()["parts"]
        assert isinstance(parts, list)
        return [int(p["pid"]) for p in parts]

    def env(self) -> dict[str, str]:
        return {**os.environ, "ANKKA_STATE": str(self.state)}

    def ankka(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ankka_command(*args),
            env=self.env(),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def wait(self, timeout: float = 60) -> int:
        return self.process.wait(timeout)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_up(
    state: Path,
    *args: str,
    ready: str = "ankka up: up in",
    deadline: float = 90.0,
    ankka: Sequence[str] = (),
    cwd: Path = REPO,
    env: Mapping[str, str] | None = None,
) -> Up:
    """Run ``ankka up`` with ``args`` and free ports; return once it printed ``ready`` (or
    exited: the caller asserts on its code and output). ``ankka`` is the command that runs
    ankka (default: this Python's ``-m ankka``), started in ``cwd`` with ``env``."""
    ports = free_port(), free_port(), free_port()
    command: Sequence[str] = [
        *(ankka or ankka_command()), "up", "--port", str(ports[0]),
        "--gateway-port", str(ports[1]), "--model-port", str(ports[2]),
        *args,  # later options win: a test may choose a port
    ]  # fmt: skip
    process = subprocess.Popen(
        list(command),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**(os.environ if env is None else env), "ANKKA_STATE": str(state)}
        | {"PYTHONUNBUFFERED": "1"},
        cwd=cwd,
    )
    up = Up(process, state, *ports)
    seen = threading.Event()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            up.output.append(line)
            if ready in line:
                seen.set()
        seen.set()

    threading.Thread(target=pump, daemon=True).start()
    if not seen.wait(deadline):  # set by the line, or by the output's end
        up.stop()
        pytest.fail(f"ankka up did not print {ready!r} in {deadline}s:\n{up.text}")
    return up


@pytest.fixture
def up_state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def running_up(up_state: Path) -> Iterator[Up]:
    up = start_up(up_state)
    try:
        yield up
    finally:
        up.stop()
