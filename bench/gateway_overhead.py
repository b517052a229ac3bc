"""What the gateway costs: direct to the upstream vs through ankka's gateway, Portkey and LiteLLM.

One run, one load generator, one upstream (ankka's stand-in, a real HTTP server on loopback),
three ways to reach it, measured in the same run so the ratios mean something on any machine:

- ``direct``: the stand-in itself;
- ``ankka``: ``ankka gateway --insecure`` in front of it (the capability check, metrics and
  the stream relay all on; TLS off, as for the others);
- ``portkey``: Portkey's gateway (npm ``@portkey-ai/gateway``, in ``.cache/portkey``: ``make
  bench-gateway`` installs it with the pins in ``bench/peers/portkey/package.json``);
- ``litellm``: the LiteLLM proxy in front of it (extra ``bench-litellm``, best in its own venv;
  started offline);
- ``baseline`` (with ``--baseline DIR``): the gateway of another checkout (say main's), run
  with the same options in the same rounds, so a change is measured before/after under the
  same load.

Each is driven plain and streaming, at concurrency 1 and 64, for ``--seconds`` each after a
warm-up. The load generator is a minimal HTTP/1.1 keep-alive client on asyncio (one connection
per concurrent worker), so it costs the machine as little as possible and the same for all three.
Before each run the stand-in's script is replaced with enough turns (``PUT /_standin/script``),
since a finite script answers 418 when it runs out. Streaming requests ask for usage themselves,
so the upstream does the same work whichever way it is reached.

Besides rates and latencies, the table gives the CPU time per request of every process on the
path, read from ``/proc``: the serving process (the stand-in for ``direct``, the gateway alone
for the gateways), the upstream stand-in, and the load generator (this process). On a shared
machine it moves far less with the load than req/s does; and with every core busy, their sum
bounds the ratio to direct a proxy can reach, which the summary prints beside the measured one.

Run: ``python bench/gateway_overhead.py`` (``--help`` for options). Prints a table and the
three ratios the gateway is held to (docs/benchmarks.md, "Gateway overhead").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.processes import Server, ankka_command, start

MODEL = "bench"
MASTER_KEY = "sk-ankka-bench"
TEXT = "hello from the stand-in upstream"


@dataclass(frozen=True)
class Result:
    target: str
    stream: bool
    concurrency: int
    requests: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float
    cpu_us: float  # the serving process's CPU time per request; nan when unknown
    upstream_us: float  # the stand-in's CPU time per request (for direct, the same as cpu_us)
    load_us: float  # the load generator's (this process's) CPU time per request

    @property
    def rps(self) -> float:
        return self.requests / self.seconds


# ------------------------------------------------------------------ the load generator


class Connection:
    """One keep-alive HTTP/1.1 connection; reads Content-Length and chunked answers whole."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, payload: bytes) -> int:
        status, _ = await self.exchange(payload, keep=False)
        return status

    async def exchange(self, payload: bytes, *, keep: bool = True) -> tuple[int, bytes]:
        """The status and (with ``keep``) the body of one request's answer."""
        if self.writer is None or self.reader is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.reader, self.writer
        writer.write(payload)
        status = int((await reader.readline()).split(b" ", 2)[1])
        length, chunked, close = -1, False, False
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
            elif name == b"connection" and b"close" in value.lower():
                close = True
        parts: list[bytes] = []
        if chunked:
            while True:
                size = int((await reader.readline()).split(b";")[0], 16)
                chunk = await reader.readexactly(size + 2)
                if keep:
                    parts.append(chunk[:-2])
                if size == 0:
                    break
        elif length >= 0:
            parts.append(await reader.readexactly(length))
        else:
            parts.append(await reader.read())
            close = True
        if close:
            writer.close()
            self.reader = self.writer = None
        return status, b"".join(parts) if keep else b""

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def payload(host: str, port: int, *, stream: bool, headers: str = "") -> bytes:
    body: dict[str, object] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Say hello."}],
    }
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    raw = json.dumps(body).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {MASTER_KEY}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(raw)}\r\n{headers}\r\n"
    )
    return head.encode() + raw


async def drive(
    url: str, *, stream: bool, concurrency: int, seconds: float, warmup: float, headers: str = ""
) -> tuple[list[float], int, float]:
    """Latencies (s) of requests finished in the measured window, errors, window length."""
    address = httpx.URL(url)
    host, port = address.host, address.port or 80
    raw = payload(host, port, stream=stream, headers=headers)
    latencies: list[float] = []
    errors = 0
    begin = time.perf_counter() + warmup
    end = begin + seconds

    async def worker() -> None:
        nonlocal errors
        connection = Connection(host, port)
        try:
            while (now := time.perf_counter()) < end:
                try:
                    status = await connection.request(raw)
                except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
                    status = 0
                    connection.close()
                    connection = Connection(host, port)
                done = time.perf_counter()
                if now >= begin:
                    if status == 200:
                        latencies.append(done - now)
                    else:
                        errors += 1
        finally:
            connection.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, errors, seconds


# ------------------------------------------------------------------ the three targets


def load_script(standin: str, turns: int) -> None:
    script = {
        "turns": [{"text": TEXT, "usage": {"input_tokens": 12, "output_tokens": 6}}] * turns,
        "models": {MODEL: {"capabilities": ["completion", "tools"]}},
    }
    httpx.put(f"{standin}/_standin/script", json=script, timeout=60).raise_for_status()


def wait_http(url: str, *, what: str, deadline: float = 180.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise SystemExit(f"{what} did not answer {url} within {deadline:g}s")


def litellm_command(explicit: str | None) -> list[str]:
    candidates = [explicit, shutil.which("litellm"), str(Path(sys.executable).parent / "litellm")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return [candidate]
    raise SystemExit(
        "the LiteLLM proxy is not installed: pip install 'ankka[bench-litellm]' "
        "(or pass --litellm PATH to its `litellm` program)"
    )


@contextmanager
def litellm_proxy(standin: str, work: Path, program: list[str]) -> Iterator[Target]:
    config = work / "litellm.yaml"
    config.write_text(
        json.dumps(
            {
                "model_list": [
                    {
                        "model_name": MODEL,
                        "litellm_params": {
                            "model": f"openai/{MODEL}",
                            "api_base": f"{standin}/v1",
                            "api_key": "none",
                        },
                    }
                ],
                "litellm_settings": {"telemetry": False},
            }
        )
    )
    port = free_port()
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY_DISABLED": "true",
        "LITELLM_MASTER_KEY": MASTER_KEY,
        "LITELLM_LOG": "ERROR",
    }
    log = (work / "litellm.log").open("w")
    process = subprocess.Popen(
        [*program, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(f"{url}/health/liveliness", what="the LiteLLM proxy")
        yield Target(url, process.pid)
    finally:
        stop(process)
        log.close()


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)


PORTKEY_ENTRY = "node_modules/@portkey-ai/gateway/build/start-server.js"


@contextmanager
def portkey_gateway(standin: str, work: Path, directory: Path) -> Iterator[Target]:
    """Portkey's gateway (npm ``@portkey-ai/gateway``, installed by ``make bench-gateway`` into
    ``.cache/portkey`` from ``bench/peers/portkey/package.json``, whose pins keep its streams
    working: docs/benchmarks.md), told per request where the upstream is, as its docs say."""
    directory = directory.resolve()
    entry = directory / PORTKEY_ENTRY
    if not entry.is_file():
        raise SystemExit(
            f"Portkey's gateway is not installed in {directory} (no {PORTKEY_ENTRY}): "
            "run `make bench-gateway`, or pass --skip-portkey"
        )
    port = free_port()
    log = (work / "portkey.log").open("w")
    process = subprocess.Popen(
        ["node", str(entry), f"--port={port}", "--headless"],
        cwd=directory,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(url, what="Portkey's gateway")
        headers = f"x-portkey-provider: openai\r\nx-portkey-custom-host: {standin}/v1\r\n"
        yield Target(url, process.pid, headers)
    finally:
        stop(process)
        log.close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# ------------------------------------------------------------------ the run


@dataclass(frozen=True)
class Target:
    url: str
    pid: int | None  # the serving process, for its CPU time
    headers: str = ""  # extra request header lines, each ending in CRLF


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process (Linux ``/proc``); nan elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError, TypeError):
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(
    name: str,
    target: Target,
    standin: Server,
    stream: bool,
    concurrency: int,
    args: argparse.Namespace,
) -> Result:
    load_script(standin.url, args.turns)
    before = cpu_seconds(target.pid), cpu_seconds(standin.process.pid), time.process_time()
    latencies, errors, seconds = asyncio.run(
        drive(
            target.url,
            stream=stream,
            concurrency=concurrency,
            seconds=args.seconds,
            warmup=args.warmup,
            headers=target.headers,
        )
    )
    after = cpu_seconds(target.pid), cpu_seconds(standin.process.pid), time.process_time()
    # The warm-up's requests are served too but not counted: count them out of the CPU time
    # by its share of the run (the rate is steady once warm).
    share = args.seconds / (args.seconds + args.warmup)
    served = len(latencies) or 1
    used, upstream, load = (
        (a - b) * share * 1e6 / served for a, b in zip(after, before, strict=True)
    )
    ms = sorted(x * 1000 for x in latencies) or [float("nan")]
    return Result(
        name,
        stream,
        concurrency,
        len(latencies),
        errors,
        seconds,
        statistics.median(ms),
        ms[min(len(ms) - 1, int(len(ms) * 0.99))],
        used if latencies else float("nan"),
        upstream if latencies else float("nan"),
        load if latencies else float("nan"),
    )


def median_of(runs: list[Result]) -> Result:
    """The run with the median rate; its own p50 and p99 are reported with it."""
    ordered = sorted(runs, key=lambda r: r.rps)
    chosen = ordered[len(ordered) // 2]
    p50 = statistics.median(r.p50_ms for r in runs)
    errors = sum(r.errors for r in runs)
    return Result(
        chosen.target,
        chosen.stream,
        chosen.concurrency,
        chosen.requests,
        errors,
        chosen.seconds,
        p50,
        chosen.p99_ms,
        statistics.median(r.cpu_us for r in runs),
        statistics.median(r.upstream_us for r in runs),
        statistics.median(r.load_us for r in runs),
    )


def measure(targets: dict[str, Target], standin: Server, args: argparse.Namespace) -> list[Result]:
    """Every scenario, each target in turn, ``--rounds`` times; the median round of each.

    Interleaving the targets within each round means a burst of load from elsewhere on the
    machine falls on all three alike instead of on whichever happened to run then.
    """
    results = []
    for stream in (False, True):
        for concurrency in args.concurrency:
            runs: dict[str, list[Result]] = {name: [] for name in targets}
            for _ in range(args.rounds):
                for name, target in targets.items():
                    runs[name].append(run_once(name, target, standin, stream, concurrency, args))
            for name in targets:
                result = median_of(runs[name])
                results.append(result)
                print(row(result), flush=True)
    return results


def row(r: Result) -> str:
    mode = "stream" if r.stream else "plain"
    return (
        f"| {r.target:8} | {mode:6} | {r.concurrency:>3} | {r.rps:>8.0f} | {r.p50_ms:>7.2f} | "
        f"{r.p99_ms:>7.2f} | {r.cpu_us:>10.0f} | {r.upstream_us:>8.0f} | {r.load_us:>6.0f} | "
        f"{r.errors:>6} |"
    )


def summary(results: list[Result], concurrency: list[int]) -> list[str]:
    def get(target: str, stream: bool, c: int) -> Result | None:
        for r in results:
            if (r.target, r.stream, r.concurrency) == (target, stream, c):
                return r
        return None

    low, high = min(concurrency), max(concurrency)
    lines = []
    for stream in (False, True):
        mode = "stream" if stream else "plain"
        direct, ankka = get("direct", stream, low), get("ankka", stream, low)
        if direct and ankka:
            added = ankka.p50_ms - direct.p50_ms
            lines.append(f"{mode}, c={low}: the gateway adds {added:.2f} ms at p50 (goal < 0.2 ms)")
        direct, ankka = get("direct", stream, high), get("ankka", stream, high)
        goal = 0.85 if stream else 0.75
        if direct and ankka:
            lines.append(
                f"{mode}, c={high}: gateway/direct = {ankka.rps / direct.rps:.2f}x (goal >= {goal})"
            )
        for name in ("ankka", "baseline", "portkey", "litellm"):
            proxy = get(name, stream, high)
            if direct and proxy and name != "ankka" and ankka and proxy.rps > 0:
                lines.append(
                    f"{mode}, c={high}: ankka/{name} = {ankka.rps / proxy.rps:.2f}x req/s, "
                    f"{name} spends {proxy.cpu_us / ankka.cpu_us:.2f}x ankka's CPU per request"
                )
            if direct and proxy:
                lines.append(f"{mode}, c={high}: {ceiling(direct, proxy)}")
        for c in concurrency:
            ankka, baseline = get("ankka", stream, c), get("baseline", stream, c)
            if ankka and baseline:
                added = ankka.p50_ms - baseline.p50_ms
                lines.append(
                    f"{mode}, c={c}: ankka vs baseline: p50 {added:+.2f} ms, "
                    f"req/s {ankka.rps / baseline.rps:.2f}x, "
                    f"CPU/request {ankka.cpu_us / baseline.cpu_us:.2f}x"
                )
    return lines


def ceiling(direct: Result, proxy: Result) -> str:
    """The best ratio to direct that the CPU allows: with every core busy, throughput goes as
    1 / (CPU per request of every process on the path), so a proxy can reach at best
    (upstream + load) direct ÷ (upstream + load + proxy) through it."""
    alone = direct.upstream_us + direct.load_us
    through = proxy.upstream_us + proxy.load_us + proxy.cpu_us
    return (
        f"{proxy.target} CPU µs/request {proxy.cpu_us:.0f} (upstream {proxy.upstream_us:.0f}, "
        f"load {proxy.load_us:.0f}; direct {direct.upstream_us:.0f} + {direct.load_us:.0f}): "
        f"best ratio the CPU allows {alone / through:.2f}x, measured {proxy.rps / direct.rps:.2f}x"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/gateway_overhead.py", description=__doc__)
    parser.add_argument("--seconds", type=float, default=4.0, help="measured time per run")
    parser.add_argument("--warmup", type=float, default=0.5, help="unmeasured time first")
    parser.add_argument("--rounds", type=int, default=3, help="runs per target and scenario")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--turns", type=int, default=60_000, help="script turns per run")
    parser.add_argument("--litellm", metavar="PATH", help="the LiteLLM proxy's `litellm` program")
    parser.add_argument("--skip-litellm", action="store_true", help="leave LiteLLM out")
    parser.add_argument(
        "--portkey",
        metavar="DIR",
        type=Path,
        default=Path(".cache/portkey"),
        help="where Portkey's gateway is installed (default .cache/portkey)",
    )
    parser.add_argument("--skip-portkey", action="store_true", help="leave Portkey out")
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        type=Path,
        help="also measure the gateway of this checkout (e.g. main's), in the same rounds",
    )
    args = parser.parse_args(argv)

    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        script = work / "script.json"
        script.write_text(
            json.dumps({"turns": [], "models": {MODEL: {"capabilities": ["completion"]}}})
        )
        standin: Server = start(ankka_command("standin", "--script", str(script), "--port", "0"))
        stack.callback(standin.stop)
        models = work / "models.yaml"
        models.write_text(
            json.dumps({"models": [{"name": MODEL, "kind": "ollama", "url": standin.url}]})
        )
        gateway = start(
            ankka_command("gateway", "--models", str(models), "--insecure", "--port", "0")
        )
        stack.callback(gateway.stop)
        wait_http(f"{gateway.url}/readyz", what="the ankka gateway")
        targets = {
            "direct": Target(standin.url, standin.process.pid),
            "ankka": Target(gateway.url, gateway.process.pid),
        }
        if args.baseline is not None:
            # `python -m ankka` from the other checkout's root imports that checkout's ankka.
            base = start(
                ankka_command("gateway", "--models", str(models), "--insecure", "--port", "0"),
                cwd=args.baseline.resolve(),
            )
            stack.callback(base.stop)
            wait_http(f"{base.url}/readyz", what=f"the gateway of {args.baseline}")
            targets["baseline"] = Target(base.url, base.process.pid)
        if not args.skip_portkey:
            targets["portkey"] = stack.enter_context(
                portkey_gateway(standin.url, work, args.portkey)
            )
        if not args.skip_litellm:
            program = litellm_command(args.litellm)
            targets["litellm"] = stack.enter_context(litellm_proxy(standin.url, work, program))
        load = os.getloadavg()[0]
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load:.1f}; "
            f"{args.seconds:g} s per run, median of {args.rounds} interleaved rounds"
        )
        print(
            "| target   | mode   |   c |    req/s | p50 ms  | p99 ms  | CPU µs/req "
            "| upstream | load   | errors |"
        )
        print(
            "|----------|--------|-----|----------|---------|---------|------------"
            "|----------|--------|--------|"
        )
        results = measure(targets, standin, args)
    print()
    for line in summary(results, args.concurrency):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
