"""Start ankka's own servers as real processes on loopback, for integration tests.

Every server ankka ships prints ``<name>: listening on http://HOST:PORT`` once it listens;
:func:`start` runs a command with ``--port 0``, waits for that line (with a deadline) and
hands back the address. A process that exits or stays silent fails the test with its output.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Server", "ankka_command", "start", "started"]

_LISTENING = re.compile(r'listening on (https?://[^\s"]+)')
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Server:
    process: subprocess.Popen[str]
    url: str
    output: list[str] = field(default_factory=list)

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return "".join(self.output)


def ankka_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ankka", *args]


def start(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    deadline: float = 30.0,
    max_files: int | None = None,
) -> Server:
    """``max_files``: the process's limit on open files (RLIMIT_NOFILE), as a small pod's."""
    merged = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}

    def limit_files() -> None:
        if max_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (max_files, max_files))

    process = subprocess.Popen(
        list(command),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=merged,
        cwd=cwd or REPO,
        preexec_fn=limit_files if max_files is not None else None,
    )
    output: list[str] = []
    found: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            match = _LISTENING.search(line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    ready.wait(deadline)  # set by the listening line, or by the output's end
    if not found:
        process.kill()
        process.wait()
        raise RuntimeError(
            f"{' '.join(command)} did not start listening within {deadline}s "
            f"(exit code {process.poll()}); its output:\n{''.join(output)}"
        )
    return Server(process, found[0], output)


@contextmanager
def started(
    command: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> Iterator[Server]:
    server = start(command, env=env, cwd=cwd)
    try:
        yield server
    finally:
        server.stop()
