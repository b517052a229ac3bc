"""Starting llama-server on a CPU that reports instructions the kernel will not let it use.

Why this exists: llama.cpp built for the build machine's CPU (``GGML_NATIVE``) repacks the
model's weights at load time for the fastest kernels the CPU reports, AMX on Intel's Sapphire
Rapids family. Under a kernel or VM that does not grant a process the AMX tile state, the
CPU still reports ``amx_tile amx_int8 amx_bf16`` and the server dies right after "llama
threadpool init" of SIGILL (SIGSEGV was seen too) before it ever answers. ``--no-repack``
keeps the weights as they are in the file, so those kernels are never used, and the server
starts. So a server that dies of SIGILL, SIGSEGV or SIGBUS before it is ready is started again
with ``--no-repack`` (docs/local-model.md).

Who uses it: :mod:`ankka.local.local_model` (``ankka local-model``, ``ankka up --model local``,
the tests' fixture, ``bench/judgments.py``) for the decisions and the words; and the
llama-server image, whose entrypoint is this file run by the image's own ``python3``
(``python3 -m ankka.local.llama_fallback``), so a model pod on such a node serves instead of
crash-looping.

It imports nothing but the standard library and :mod:`ankka._kernel.exits` (the words for
an exit, shared with the operator); the image carries those files alone
(``scripts/image.sh llama-entrypoint``). The decisions and the words are pure functions;
:func:`main` (the image's entrypoint) is the only I/O: it starts the server with the pod's
arguments, waits for ``/health``, retries with ``--no-repack`` when the first start dies of a
crash signal, then stays the server's parent, passing it SIGTERM and SIGINT and exiting with
its code.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ankka._kernel.exits import exit_words, signal_of

__all__ = [
    "AS_BUILT",
    "CRASH_SIGNALS",
    "NO_REPACK",
    "WAYS",
    "Attempt",
    "Way",
    "all_died",
    "exit_code_for",
    "failed_words",
    "fell_back_words",
    "health_url",
    "main",
    "way_named",
    "ways_to_try",
    "worth_another_way",
]

# The signals a server dies of when it runs an instruction this machine refuses (SIGILL), or
# a kernel that misbehaves for want of the state it was not granted (SIGSEGV, SIGBUS).
CRASH_SIGNALS = frozenset({signal.SIGILL, signal.SIGSEGV, signal.SIGBUS})


@dataclass(frozen=True, slots=True)
class Way:
    """One way to start llama-server: the flags added to its command line."""

    name: str  # what the cache records and --repack names
    flags: tuple[str, ...]
    words: str  # how a progress line says it


AS_BUILT = Way("as-built", (), "as built")
NO_REPACK = Way("no-repack", ("--no-repack",), "with --no-repack")
WAYS = (AS_BUILT, NO_REPACK)  # the order tried when nothing is remembered


@dataclass(frozen=True, slots=True)
class Attempt:
    """A start that did not become ready: how, its exit code (None: it never answered in
    time and was stopped), and the last lines of its log."""

    way: Way
    returncode: int | None
    log_tail: str


def way_named(name: str) -> Way:
    for way in WAYS:
        if way.name == name:
            return way
    known = ", ".join(w.name for w in WAYS)
    raise ValueError(f"no way to start llama-server is called {name!r} (known: {known})")


def ways_to_try(remembered: str | None = None) -> tuple[Way, ...]:
    """Every way, the remembered one first (an unknown name is ignored)."""
    first = next((w for w in WAYS if w.name == remembered), None)
    if first is None:
        return WAYS
    return (first, *(w for w in WAYS if w is not first))


def worth_another_way(returncode: int | None) -> bool:
    """Whether a start that ended with ``returncode`` before it was ready may work another
    way: a crash signal, not a bad argument, a missing file or a timeout."""
    if returncode is None:
        return False
    return signal_of(returncode) in CRASH_SIGNALS


def exit_code_for(returncode: int) -> int:
    """The code a wrapper exits with for a child's ``returncode`` (``128+N`` for a signal,
    as a shell does: a container's PID 1 cannot kill itself with the signal)."""
    signum = signal_of(returncode)
    return 128 + signum if signum is not None else returncode


def _attempt_words(attempt: Attempt) -> str:
    if attempt.returncode is None:
        return "did not answer in time"
    return f"{exit_words(attempt.returncode)} before it was ready"


def failed_words(failed: Sequence[Attempt]) -> str:
    """``as built it died of illegal instruction (SIGILL) before it was ready``."""
    return "; ".join(f"{a.way.words} it {_attempt_words(a)}" for a in failed)


def fell_back_words(failed: Sequence[Attempt], way: Way) -> str:
    """Why ``way`` was taken after ``failed``: ``with --no-repack: as built it died of
    illegal instruction (SIGILL) before it was ready``."""
    if not failed:
        return way.words
    return f"{way.words}: {failed_words(failed)}"


def all_died(attempts: Sequence[Attempt]) -> str:
    """The report when no way started: each attempt, how it ended, its log's last lines."""
    if len(attempts) == 1:
        (only,) = attempts
        return (
            f"llama-server {_attempt_words(only)} (started {only.way.words}); its log ends:\n"
            f"{only.log_tail}"
        )
    lines = [f"llama-server did not start in any of the {len(attempts)} ways ankka tries:"]
    for number, attempt in enumerate(attempts, 1):
        lines.append(f"{number}. {attempt.way.words}: it {_attempt_words(attempt)}; its log ended:")
        lines.extend(f"   {line}" for line in attempt.log_tail.splitlines())
    return "\n".join(lines)


def _option(args: Sequence[str], names: tuple[str, ...]) -> str | None:
    value = None
    for index, word in enumerate(args):
        for name in names:
            if word == name and index + 1 < len(args):
                value = args[index + 1]
            elif word.startswith(name + "="):
                value = word.split("=", 1)[1]
    return value


def health_url(args: Sequence[str], env: Mapping[str, str]) -> str:
    """Where the server started with ``args`` (and ``env``'s ``LLAMA_ARG_*``) answers
    ``/health``, asked from inside its own pod."""
    port = _option(args, ("--port",)) or env.get("LLAMA_ARG_PORT") or "8080"
    host = _option(args, ("--host",)) or env.get("LLAMA_ARG_HOST") or "127.0.0.1"
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/health"


# ---------------------------------------------------------------- the image's entrypoint (I/O)

_LOG_TAIL_LINES = 20
_READY_TIMEOUT_S = 600.0  # a big model on a slow node; the kubelet's probes judge it too


def _say(text: str) -> None:
    print(f"[ankka llama-server start] {text}", file=sys.stderr, flush=True)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2.0) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _wait(process: subprocess.Popen[bytes], url: str, deadline: float) -> int | None:
    """The exit code if the server ends before ``url`` answers 200; None once it answers, or
    at the deadline (left running: a slow load is not a crash, and the kubelet's probes
    judge it from there)."""
    while True:
        code = process.poll()
        if code is not None:
            return code
        if _answers(url) or time.monotonic() >= deadline:
            return None
        time.sleep(0.2)


def _write_termination_message(text: str) -> None:
    # The kubelet shows this file's content as the container's lastState.terminated.message.
    with contextlib.suppress(OSError), open("/dev/termination-log", "w") as sink:
        sink.write(text[-4000:])


class _Child:
    """The server being started or served; SIGTERM and SIGINT are passed on to it (the
    kubelet stops a pod that way, while it starts too), and no other way is tried after."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.stopping = False
        self._before: dict[int, Any] = {}

    def __enter__(self) -> _Child:
        for signum in (signal.SIGTERM, signal.SIGINT):
            self._before[signum] = signal.signal(signum, self._forward)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._before.items():  # for a caller that goes on (a test)
            signal.signal(signum, handler)

    def _forward(self, signum: int, frame: object) -> None:
        self.stopping = True
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signum)


def _serve(process: subprocess.Popen[bytes]) -> int:
    """Stay the server's parent until it ends; exit as it did."""
    code = process.wait()
    if signal_of(code) in CRASH_SIGNALS:
        _say(f"llama-server {exit_words(code)} while serving")
    return exit_code_for(code)


def main(
    argv: Sequence[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    launch: Callable[[list[str]], subprocess.Popen[bytes]] | None = None,
) -> int:
    """``python3 -m ankka.local.llama_fallback BINARY ARGS...``: run ``BINARY ARGS``, again
    with ``--no-repack`` if it dies of a crash signal before ``/health`` answers; then serve
    (see the module's doc)."""
    words = list(sys.argv[1:] if argv is None else argv)
    if not words:
        print(
            "usage: python3 -m ankka.local.llama_fallback LLAMA_SERVER [ARGS...]",
            file=sys.stderr,
        )
        return 2
    binary, args = words[0], words[1:]
    env = os.environ if env is None else env
    launch = launch or (lambda command: subprocess.Popen(command))  # the pod's stdout, stderr
    url = health_url(args, env)
    forced = env.get("ANKKA_LLAMA_REPACK", "auto").strip().lower()
    ways = {"on": (AS_BUILT,), "off": (NO_REPACK,)}.get(forced, WAYS)
    if forced not in ("auto", "on", "off"):
        _say(f"ANKKA_LLAMA_REPACK={forced!r} is not auto, on or off; trying every way (auto)")
    if NO_REPACK.flags[0] in args:
        ways = (AS_BUILT,)  # asked for already: nothing else to fall back to
    with _Child() as child:
        return _start_and_serve(child, [binary, *args], ways, url, launch)


def _start_and_serve(
    child: _Child,
    command: list[str],
    ways: tuple[Way, ...],
    url: str,
    launch: Callable[[list[str]], subprocess.Popen[bytes]],
) -> int:
    failed: list[Attempt] = []
    for number, way in enumerate(ways, 1):
        child.process = launch([*command, *way.flags])
        code = _wait(child.process, url, time.monotonic() + _READY_TIMEOUT_S)
        if code is None:
            _say(f"llama-server started {fell_back_words(failed, way)}")
            return _serve(child.process)
        if child.stopping:  # stopped while it started: not a failure to report
            return exit_code_for(code)
        failed.append(Attempt(way, code, "(in the container's log above)"))
        if not worth_another_way(code) or number == len(ways):
            break
        _say(f"llama-server {exit_words(code)} before it was ready; trying {ways[number].words}")
    report = all_died(failed)
    _say(report)
    _write_termination_message(report)
    return exit_code_for(failed[-1].returncode or 1)


if __name__ == "__main__":
    raise SystemExit(main())
