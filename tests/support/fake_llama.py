"""Stand-ins for a llama-server on a machine that refuses AMX, for tests of the start fallback.

Why this exists: the crash ankka falls back from (llama.cpp's AMX repack path dying of SIGILL
where the CPU reports AMX and the kernel does not grant it) cannot happen on the machines
these tests run on (AMD EPYC, no AMX). So the crash is made by a small shell script that
dies of the signal, the way the real server does, unless ``--no-repack`` is among its
arguments; then it either answers ``/health`` itself (unit tests) or execs the real
llama-server (the real-model tier's simulated AMX refusal). Each start appends its arguments
to a calls file, so a test sees which commands were tried.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

__all__ = ["DIES", "calls", "fake_server", "refusing_wrapper"]

# How a refused start ends: a signal delivered to the shell itself (subprocess sees -N), or
# an exit code of 128+N as a shell reports a child killed by signal N.
DIES = {
    "SIGILL": "kill -ILL $$",
    "SIGSEGV": "kill -SEGV $$",
    "SIGBUS": "kill -BUS $$",
    "132": "exit 132",
    "code 1": "echo 'error: unknown argument' >&2; exit 1",
}

# Answers GET /health with 200 on the --port it was given (the rest of a llama-server's
# arguments are ignored); exits 0 on SIGTERM as llama-server does.
_HEALTH = """
import http.server, signal, sys
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")
    def log_message(self, *args):
        pass
print("main: server is listening on port", port, flush=True)
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


def _script(path: Path, calls_file: Path, refuse: str, serve: str) -> Path:
    text = (
        "#!/bin/sh\n"
        f'echo "$*" >> {shlex.quote(str(calls_file))}\n'
        'echo "llama threadpool init, n_threads = 2"\n'
        f"{refuse}\n"
        f"{serve}\n"
    )
    # Rewritten only when it changes: a program's identity (size, time) is what a start
    # remembers its way by, so an unchanged wrapper stays the same program.
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    path.chmod(0o755)
    return path


def fake_server(
    path: Path, calls_file: Path, *, dies: str | None = "SIGILL", always: bool = False
) -> Path:
    """A llama-server that dies as ``dies`` names (a key of :data:`DIES`; None: never) unless
    ``--no-repack`` is in its arguments (``always``: whatever its arguments), and otherwise
    answers ``/health``."""
    if dies is None:
        refuse = ":"
    elif always:
        refuse = DIES[dies]
    else:
        refuse = f'case " $* " in *" --no-repack "*) ;; *) {DIES[dies]} ;; esac'
    serve = f'exec {shlex.quote(sys.executable)} -c {shlex.quote(_HEALTH)} "$@"'
    return _script(path, calls_file, refuse, serve)


def refusing_wrapper(path: Path, real: Path, calls_file: Path) -> Path:
    """The real llama-server ``real`` as it behaves where the CPU reports AMX and the kernel
    refuses it: killed by SIGILL right after threadpool init unless given ``--no-repack``."""
    refuse = (
        'case " $* " in *" --no-repack "*) ;; *) '
        'echo "(simulated: this machine refuses AMX tiles)"; kill -ILL $$ ;; esac'
    )
    return _script(path, calls_file, refuse, f'exec {shlex.quote(str(real))} "$@"')


def calls(calls_file: Path) -> list[list[str]]:
    """The argument lists the fake was started with, oldest first."""
    if not calls_file.exists():
        return []
    return [line.split() for line in calls_file.read_text().splitlines()]
