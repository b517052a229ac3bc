"""Starting ``up``'s parts in order, watching them, and stopping them.

Each part is a child process in a session of its own (Ctrl-C reaches the supervisor only, which
stops the parts in reverse order: runtime, gateway, model), with its output in its log. A part
is ready when its log shows the address it serves (ankka's servers print ``listening on URL``;
``ankka local-model`` prints ``serving MODEL at URL``) and, for the gateway, once its
``/readyz`` says every model was probed well (asked over mTLS with the runtime's
certificate). A part that exits, or is not ready in time, fails the start with its name, why
(a signal by its name), and its log's path and last lines, or, for a part that reports its
own failure (``ankka local-model``: each way it tried to start llama-server), that report.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx2

from ankka._kernel.errors import ConfigurationError, DependencyFailed
from ankka._kernel.exits import exit_words
from ankka.local.up.plan import HOST, Part, Probe

__all__ = [
    "PartFailed",
    "PortInUse",
    "Running",
    "check_ports",
    "remark",
    "start_part",
    "stop",
    "tail",
]

_READY = re.compile(r'(?:listening on|serving \S+ at) (https?://[^\s"]+)')
_STOP_GRACE_S = 15.0


class PartFailed(DependencyFailed):
    """A part did not start, or stopped; says which, why, and where its log is (the person
    running ``up`` reads it: a broken script, a missing install, a bad module)."""

    kind = "part_failed"

    def __init__(self, part: Part, why: str) -> None:
        self.part = part
        super().__init__(
            f"the {part.name} ({part.what}) {why}; its log is {part.log}, ending:\n"
            f"{tail(part.log, report_from=part.report_from)}"
        )


class PortInUse(ConfigurationError):
    """A part's port is taken: the person running ``up`` chooses another."""

    kind = "port_in_use"

    def __init__(self, part: Part, option: str) -> None:
        self.part = part
        super().__init__(
            f"the {part.name}'s port {part.port} on {HOST} is in use by another program; "
            f"stop it or pass {option} with a free port"
        )


def tail(log: Path, lines: int = 15, *, report_from: str | None = None) -> str:
    """The log's last ``lines``; with ``report_from``, from the last line that starts with it
    (a part's own report of its failure, up to 80 lines) when there is one."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "  (no log)"
    rows = text.splitlines()
    shown = rows[-lines:]
    if report_from is not None:
        starts = [i for i, row in enumerate(rows) if row.startswith(report_from)]
        if starts:
            shown = rows[starts[-1] :][:80]
    return "\n".join(f"  {line}" for line in shown) or "  (empty)"


def remark(log: Path, pattern: str | None) -> str | None:
    """The first line of ``log`` matching ``pattern`` (a part's remark), if any."""
    if pattern is None:
        return None
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = re.search(pattern, text, re.MULTILINE)
    return match.group(0).strip() if match else None


def check_ports(parts: tuple[Part, ...], options: dict[str, str]) -> None:
    """Refuse before anything starts when a part's port is taken (``options`` names the flag
    that sets each part's port)."""
    for part in parts:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((HOST, part.port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise PortInUse(part, options[part.name]) from exc
                raise


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # PR_SET_PDEATHSIG: a supervisor killed with SIGKILL leaves no part holding a port.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


@dataclass(slots=True)
class Running:
    part: Part
    process: subprocess.Popen[bytes]
    started_s: float  # how long it took to become ready

    @property
    def pid(self) -> int:
        return self.process.pid


def _ready_address(log: Path) -> str | None:
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = _READY.search(text)
    return match.group(1) if match else None


def _not_ready(probe: Probe) -> str | None:
    """Why the gateway is not ready yet (its /readyz), or None once every model is probed
    well."""
    context = ssl.create_default_context(cafile=str(probe.tls_dir / "ca.crt"))
    context.load_cert_chain(str(probe.tls_dir / "tls.crt"), str(probe.tls_dir / "tls.key"))
    try:
        with httpx2.Client(verify=context, timeout=5.0) as client:
            answer = client.get(probe.url)
        body = answer.json()
    except (httpx2.HTTPError, ValueError) as exc:
        return f"{probe.url} did not answer: {exc}"
    models = body.get("models", {}) if isinstance(body, dict) else {}
    waiting = [
        f"model {name!r}: {m.get('error') or 'not probed yet'}"
        for name, m in models.items()
        if not isinstance(m, dict) or m.get("capabilities") is None
    ]
    if answer.status_code == 200 and not waiting:
        return None
    return "; ".join(waiting) or f"{probe.url} answered {answer.status_code}"


def start_part(
    part: Part,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Running:
    """Start ``part`` and return once its log says it serves; stop it and raise
    :class:`PartFailed` when it exits first or is not ready within its timeout."""
    part.log.parent.mkdir(parents=True, exist_ok=True)
    began = clock()
    with part.log.open("wb") as sink:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            list(part.command),
            env=dict(part.env),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
    running = Running(part, process, 0.0)
    try:
        waiting: str | None = "its log shows no address yet"
        while waiting is not None:
            code = process.poll()
            if code is not None:
                raise PartFailed(part, f"{exit_words(code)} before it was ready")
            if clock() - began > part.ready_timeout:
                raise PartFailed(
                    part, f"was not ready within {part.ready_timeout:.0f} s ({waiting})"
                )
            sleep(0.05)
            if _ready_address(part.log) is None:
                continue
            waiting = _not_ready(part.probe) if part.probe is not None else None
    except BaseException:
        stop([running])
        raise
    running.started_s = clock() - began
    return running


def terminate(pid: int, *, grace_s: float = _STOP_GRACE_S, is_alive: Callable[[int], bool]) -> None:
    """SIGTERM ``pid``, SIGKILL it when it outlives ``grace_s``."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + grace_s
    while is_alive(pid):
        if time.monotonic() > end:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            end = time.monotonic() + grace_s
        time.sleep(0.05)


def stop(running: list[Running]) -> None:
    """Stop the parts, the last started first, each SIGTERM then SIGKILL after a grace."""
    for item in reversed(running):
        if item.process.poll() is None:
            item.process.terminate()
            try:
                item.process.wait(_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                item.process.kill()
                item.process.wait()
