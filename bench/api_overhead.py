"""What the runtime's HTTP layer costs per request, in-process: the app called as ASGI.

No server, no socket, no model over HTTP: ``create_app`` (bounds, routing, body parsing,
validation, the answer's rendering) is called with a prepared ASGI scope, the runtime behind
it on SQLite (WAL, ``synchronous=FULL``, as ``ankka serve``) with the scripted provider at the
model seam. So what differs between two checkouts' figures is their HTTP layer and whatever
else changed on the path (nothing else, for a change to ``serve/`` alone). Three requests:

- ``GET /healthz``: routing and the answer only;
- ``GET /v1/sessions/{s}``: a session of 20 turns, summarised (the journal read from the fold
  cache; the answer has 14 fields);
- ``POST /v1/agents/{agent}/sessions/{s}``: a fresh turn, committed before its answer.

Printed: CPU time (``time.process_time``) per request, p50 of ``--rounds`` rounds of
``--requests`` each. ``--baseline DIR`` runs this file against DIR's checkout as well, one
process each, alternated, and prints both side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

# --baseline runs this file against another checkout's ankka: ANKKA_FROM names it.
sys.path.insert(0, os.environ.get("ANKKA_FROM") or str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
Message = MutableMapping[str, Any]
App = Callable[
    [Message, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
    Awaitable[None],
]


def _scope(method: str, path: str, body: bytes) -> Message:
    headers = [(b"host", b"bench"), (b"content-length", str(len(body)).encode())]
    if body:
        headers.append((b"content-type", b"application/json"))
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


async def _call(app: App, method: str, path: str, body: bytes = b"") -> int:
    sent = False
    status = 0

    async def receive() -> Message:
        nonlocal sent
        if sent:
            await asyncio.Event().wait()  # nothing more: the caller stays
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])

    await app(_scope(method, path, body), receive, send)
    return status


async def _open(path: str) -> Any:
    """The store at ``path``: one database per URL (``Store``), or in a checkout from before
    that, the journal's own SQLite store (which is its own journal store)."""
    try:
        from ankka.runtime.store.open import Store
    except ImportError:
        sqlite: Any = importlib.import_module("ankka.runtime.store.sqlite")
        store = await sqlite.SqliteStore.open(path)
        store.journal_store = store
        return store
    return await Store.open(path)


async def _measure(requests: int, rounds: int) -> dict[str, list[float]]:
    from ankka.runtime.declare.agents import Service, Turn, TurnRequest
    from ankka.runtime.drivers.context import Context
    from ankka.runtime.drivers.request import Runtime
    from ankka.runtime.providers.scripted import ScriptedProvider
    from ankka.runtime.serve.http import create_app

    service = Service("bench")

    @service.agent("echo")
    def echo(request: TurnRequest) -> Turn:
        return Turn(message=request.message)

    total = 20 + rounds * requests + 10
    provider = ScriptedProvider(
        ["It is -3 °C with light snow in Helsinki."] * total, name="default"
    )
    figures: dict[str, list[float]] = {"healthz": [], "session": [], "turn": []}
    with tempfile.TemporaryDirectory() as tmp:
        store = await _open(str(Path(tmp) / "bench.sqlite3"))
        context = Context.open(service, store=store.journal_store, providers={"default": provider})
        async with store, Runtime(context) as rt:
            app: App = create_app(rt)
            turn = json.dumps({"message": "What is the weather in Helsinki?"}).encode()
            for _ in range(20):
                assert await _call(app, "POST", "/v1/agents/echo/sessions/long", turn) == 200
            for _ in range(3):  # warm: first calls build what is cached
                await _call(app, "GET", "/healthz")
                await _call(app, "GET", "/v1/sessions/long")
            cases: dict[str, Callable[[int], Awaitable[int]]] = {
                "healthz": lambda n: _call(app, "GET", "/healthz"),
                "session": lambda n: _call(app, "GET", "/v1/sessions/long"),
                "turn": lambda n: _call(app, "POST", f"/v1/agents/echo/sessions/f{n}", turn),
            }
            for round_ in range(rounds):
                for name, case in cases.items():
                    began = time.process_time()
                    for n in range(requests):
                        status = await case(round_ * requests + n)
                        assert status == 200, (name, status)
                    figures[name].append((time.process_time() - began) / requests * 1e6)
    return figures


def _run(args: argparse.Namespace) -> int:
    figures = asyncio.run(_measure(args.requests, args.rounds))
    print(json.dumps({name: statistics.median(v) for name, v in figures.items()}))
    return 0


def _compare(args: argparse.Namespace) -> int:
    checkouts = {"before": args.baseline.resolve(), "after": ROOT}
    rows: dict[str, dict[str, list[float]]] = {}
    load = os.getloadavg()[0]
    for round_ in range(args.repeat):
        for which in ("before", "after") if round_ % 2 == 0 else ("after", "before"):
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    f"--requests={args.requests}",
                    f"--rounds={args.rounds}",
                ],
                cwd=checkouts[which],
                env={**os.environ, "ANKKA_FROM": str(checkouts[which])},
                capture_output=True,
                text=True,
                check=True,
                timeout=1800,
            ).stdout
            for name, value in json.loads(out.splitlines()[-1]).items():
                rows.setdefault(name, {}).setdefault(which, []).append(value)
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load:.1f} at the "
        f"start, {os.getloadavg()[0]:.1f} at the end; before = {checkouts['before']}, after = "
        f"{checkouts['after']}; {args.repeat} processes each, alternated; CPU µs per request, "
        f"each the median of {args.rounds} rounds of {args.requests}"
    )
    print("| request | before | after | after ÷ before (medians) |")
    print("|---|---|---|---:|")
    for name, by in rows.items():
        before, after = by["before"], by["after"]
        ratio = statistics.median(after) / statistics.median(before)
        print(
            f"| {name} | {', '.join(f'{v:.0f}' for v in before)} | "
            f"{', '.join(f'{v:.0f}' for v in after)} | {ratio:.2f}× |"
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="bench/api_overhead.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--requests", type=int, default=200, help="requests per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per process")
    parser.add_argument("--baseline", type=Path, help="a checkout to compare against")
    parser.add_argument("--repeat", type=int, default=4, help="with --baseline: processes each")
    args = parser.parse_args()
    return _compare(args) if args.baseline is not None else _run(args)


if __name__ == "__main__":
    sys.exit(main())
