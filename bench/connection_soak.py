"""Soak: 1,100 idle never-handshaking sockets and 512 streams from one caller, while a second
caller's turns must all succeed (issue 31, items 6 and 7).

Starts the gateway over mTLS (``--target gateway``) or ``ankka serve --tls-dir`` with a probe
port (``--target runtime``), each as a real process limited to 1,024 open files (the pod
default the issue measured at), with certificates made here (``tests/support/certs.py``) and
``ankka standin`` as the model. For ``--seconds``:

- **the crowd**: 1,100 sockets from 127.0.0.2 connect and never send a ClientHello; each one
  the server closes is opened again at once, so the pressure never lets up;
- **alice**: 512 streams (a chat stream on the gateway's ``slow`` model, a turn stream of the
  runtime's ``held`` agent, on its ``slow`` model: ``bench/soak_service.py``), each answered
  only after the soak ends, from 127.0.0.3 and 127.0.0.4, opened 32 at a time and held; past
  her share the server answers 429;
- **bob**: turns one after another from 127.0.0.1 (on the ``fast`` model), and
  ``/healthz`` every second on the API port (and on the probe port for the runtime).

Prints what each side saw: bob's turns and failures, his latency (p50, p99, max), the
health checks, alice's streams held and refused, and the crowd's sockets closed by the server.
With ``--baseline DIR`` the same against another checkout (say the commit before the fix).
Not a test: figures for docs/benchmarks.md ("Connection soak"), always with the load average.

Run: ``python bench/connection_soak.py --target gateway`` (``--help`` for options).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import ssl
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from tests.support.certs import GATEWAY_URI, client_context, new_ca, write_tls_dir
from tests.support.hold import open_files_at_least
from tests.support.processes import Server, ankka_command, start

CROWD, STREAMS = 1_100, 512
CROWD_SIZE = [CROWD, STREAMS]  # --crowd, --streams


@dataclass
class Seen:
    turns: int = 0
    failed: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    health: int = 0
    health_failed: int = 0
    held: int = 0
    refused: int = 0
    stream_errors: int = 0
    stream_why: dict[str, int] = field(default_factory=dict)
    crowd_closed: int = 0

    def stream_failed(self, what: str) -> None:
        self.stream_errors += 1
        self.stream_why[what] = self.stream_why.get(what, 0) + 1

    def error(self, what: str) -> None:
        self.failed += 1
        self.errors[what] = self.errors.get(what, 0) + 1


@dataclass
class Target:
    server: Server
    url: str  # https
    probe: str | None  # a plain health URL
    stream: bytes  # one of alice's requests (its session, for the runtime, appended)
    turn: tuple[str, dict[str, object]]  # bob's: path and body


async def crowd_member(port: int, stop: asyncio.Event, seen: Seen) -> None:
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, local_addr=("127.0.0.2", 0)
            )
        except OSError:
            await asyncio.sleep(0.05)
            continue
        try:
            reading = asyncio.ensure_future(reader.read(1))
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if reading.done():
                seen.crowd_closed += 1
            reading.cancel()
            stopping.cancel()
        except OSError:
            seen.crowd_closed += 1
        finally:
            writer.close()


async def stream(
    port: int, request: bytes, source: str, tls: ssl.SSLContext, stop: asyncio.Event, seen: Seen
) -> None:
    try:
        async with CONNECTING:  # a client pool opens a few at a time, not 512 at once
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=tls, server_hostname="127.0.0.1", local_addr=(source, 0)
            )
    except (OSError, ssl.SSLError) as exc:
        seen.stream_failed(f"connect: {type(exc).__name__}")
        return
    try:
        writer.write(request)
        try:  # a refusal comes at once; a stream's head may wait for the (slow) model
            head = await asyncio.wait_for(reader.read(12), 10)
        except TimeoutError:
            head = b"HTTP/1.1 200 (waiting)"
        if head.startswith(b"HTTP/1.1 429"):
            seen.refused += 1
            return
        if not head.startswith(b"HTTP/1.1 200"):
            seen.stream_failed(head.decode("latin-1") or "closed")
            return
        seen.held += 1
        await stop.wait()
    except (OSError, ssl.SSLError) as exc:
        seen.stream_failed(type(exc).__name__)
    finally:
        writer.close()


async def bob(target: Target, tls: ssl.SSLContext, stop: asyncio.Event, seen: Seen) -> None:
    path, body = target.turn
    async with httpx.AsyncClient(verify=tls, timeout=30) as client:
        n = 0
        while not stop.is_set():
            n += 1
            started = time.monotonic()
            try:
                answer = await client.post(f"{target.url}{path.format(n=n)}", json=body)
            except httpx.HTTPError as exc:
                seen.error(type(exc).__name__)
                continue
            seen.seconds.append(time.monotonic() - started)
            if answer.status_code == 200:
                seen.turns += 1
            else:
                seen.error(str(answer.status_code))


async def health(target: Target, tls: ssl.SSLContext, stop: asyncio.Event, seen: Seen) -> None:
    urls: list[tuple[str, ssl.SSLContext | bool]] = [(f"{target.url}/healthz", tls)]
    if target.probe:
        urls.append((f"{target.probe}/healthz", True))
    while not stop.is_set():
        for url, verify in urls:
            try:
                async with httpx.AsyncClient(verify=verify, timeout=10) as client:
                    ok = (await client.get(url)).status_code == 200
            except httpx.HTTPError:
                ok = False
            seen.health += ok
            seen.health_failed += not ok
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)


CONNECTING = asyncio.Semaphore(32)  # made again for each run's loop, in soak()


async def soak(target: Target, alice: ssl.SSLContext, bobs: ssl.SSLContext, seconds: float) -> Seen:
    global CONNECTING
    CONNECTING = asyncio.Semaphore(32)
    seen = Seen()
    stop = asyncio.Event()
    port = int(target.url.rsplit(":", 1)[1])
    crowd = [asyncio.ensure_future(crowd_member(port, stop, seen)) for _ in range(CROWD_SIZE[0])]
    await asyncio.sleep(2)  # the crowd is in
    streams = [
        asyncio.ensure_future(
            stream(port, target.stream.replace(b"{i}", b"%d" % i), f"127.0.0.{3 + i % 2}",
                   alice, stop, seen)
        )
        for i in range(CROWD_SIZE[1])
    ]  # fmt: skip
    await asyncio.sleep(5)  # alice's streams are at the model, or refused
    work = [asyncio.ensure_future(bob(target, bobs, stop, seen)),
            asyncio.ensure_future(health(target, bobs, stop, seen))]  # fmt: skip
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*crowd, *streams, *work, return_exceptions=True)
    return seen


def report(name: str, seen: Seen, seconds: float) -> None:
    times = sorted(seen.seconds) or [float("nan")]
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    print(
        f"{name}: over {seconds:.0f} s bob's turns {seen.turns} ok, {seen.failed} failed "
        f"{seen.errors or ''}; latency p50 {statistics.median(times) * 1e3:.0f} ms, "
        f"p99 {p99 * 1e3:.0f} ms, max {times[-1] * 1e3:.0f} ms; /healthz {seen.health} ok, "
        f"{seen.health_failed} failed; alice's streams {seen.held} held, {seen.refused} told "
        f"429, {seen.stream_errors} failed {seen.stream_why or ''}; the crowd's sockets closed "
        f"by the server {seen.crowd_closed}",
        flush=True,
    )


def _chat(model: str, stream: bool) -> dict[str, object]:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream}


def _request(path: str, body: dict[str, object]) -> bytes:
    data = json.dumps(body).encode()
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    ).encode() + data


def _standin(work: Path, name: str, turns: list[dict[str, object]], cwd: Path) -> Server:
    path = work / f"{name}.json"
    path.write_text(
        json.dumps({"turns": turns, "models": {name: {"capabilities": ["completion"]}}})
    )
    return start(ankka_command("standin", "--script", str(path), "--port", "0"), cwd=cwd)


def gateway(work: Path, tls_dir: Path, cwd: Path, seconds: float, stop: list[Server]) -> Target:
    slow = _standin(
        work, "slow", [{"text": "late", "delay_ms": int((seconds + 30) * 1000)}] * STREAMS, cwd
    )
    fast = _standin(work, "fast", [{"text": "ok"}] * 100_000, cwd)
    stop += [slow, fast]
    models = work / "models.yaml"
    models.write_text(json.dumps({"models": [
        {"name": "slow", "kind": "ollama", "url": slow.url},
        {"name": "fast", "kind": "ollama", "url": fast.url},
    ]}))  # fmt: skip
    command = ankka_command(
        "gateway", "--models", str(models), "--tls-dir", str(tls_dir), "--host", "127.0.0.1",
        "--port", "0",
    )  # fmt: skip
    server = start(command, cwd=cwd, max_files=1024)
    stop.append(server)
    url = server.url
    time.sleep(3)  # the models are probed
    return Target(server, url, None, _request("/v1/chat/completions", _chat("slow", True)),
                  ("/v1/chat/completions", _chat("fast", False)))  # fmt: skip


def runtime(work: Path, tls_dir: Path, cwd: Path, seconds: float, stop: list[Server]) -> Target:
    late = {"text": "late", "delay_ms": int((seconds + 30) * 1000)}
    slow = _standin(work, "slow", [late] * STREAMS, cwd)
    fast = _standin(work, "fast", [{"text": "ok"}] * 100_000, cwd)
    stop += [slow, fast]
    env = {}
    for name, model in (("SLOW", slow), ("FAST", fast)):
        env[f"ANKKA_MODEL_{name}_PRESET"] = "openai-compatible"
        env[f"ANKKA_MODEL_{name}_URL"] = f"{model.url}/v1"
        env[f"ANKKA_MODEL_{name}_MODEL"] = name.lower()
    command = ankka_command(
        "serve", "bench.soak_service:service", "--port", "0",
        "--store", f"sqlite:///{work / 'soak.sqlite3'}", "--tls-dir", str(tls_dir),
        "--probe-port", "0",
    )  # fmt: skip
    server = start(command, env=env, cwd=cwd, max_files=1024)
    stop.append(server)
    url = server.url.replace("http://", "https://")
    line = next(x for x in server.output if "probes on " in x)
    probe = line.split("probes on ", 1)[1].split()[0]
    stream = _request("/v1/agents/held/sessions/alice-{i}", {"message": "hold on"})
    return Target(server, url, probe, stream,
                  ("/v1/agents/quick/sessions/bob-{n}", {"message": "hi"}))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/connection_soak.py", description=__doc__)
    parser.add_argument("--target", choices=("gateway", "runtime"), default="gateway")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--baseline", type=Path, metavar="DIR", help="also this checkout")
    parser.add_argument("--crowd", type=int, default=CROWD, help="idle sockets (%(default)s)")
    parser.add_argument("--streams", type=int, default=STREAMS, help="alice's (%(default)s)")
    args = parser.parse_args(argv)
    CROWD_SIZE[:] = [args.crowd, args.streams]
    open_files_at_least(8192)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    load = os.getloadavg()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; target {args.target}")  # fmt: skip
    here = Path(__file__).resolve().parents[1]
    runs = [("this", here)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    for name, cwd in runs:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            ca = new_ca()
            uri = GATEWAY_URI if args.target == "gateway" else "ankka://service/shop/runtime"
            tls_dir = write_tls_dir(work / "tls", leaf=ca.issue(uri, server=True), ca_pem=ca.pem)
            alice = client_context(ca, ca.issue("ankka://service/shop/alice"), work, stem="a")
            bobs = client_context(ca, ca.issue("ankka://service/shop/bob"), work, stem="b")
            servers: list[Server] = []
            try:
                make = gateway if args.target == "gateway" else runtime
                target = make(work, tls_dir, cwd, args.seconds, servers)
                seen = asyncio.run(soak(target, alice, bobs, args.seconds))
                report(name, seen, args.seconds)
                if any("Too many open files" in line for line in target.server.output):
                    print(f"{name}: the server ran out of file descriptors")
            finally:
                for server in reversed(servers):
                    server.stop()
    load = os.getloadavg()
    print(f"load average after {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
