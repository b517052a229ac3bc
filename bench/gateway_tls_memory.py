"""The gateway's memory over many TLS connections: flat, or growing with each one?

Issue 31, item 10: the gateway's resident memory grew with every mTLS connection (37 -> 247 MB
over 35,000 connections) and stayed flat over plain HTTP. This starts ``ankka gateway`` over
mTLS (real certificates, made here with ``tests/support/certs.py``), opens ``--connections``
connections, ``--concurrency`` at a time, each one handshake, one ``GET /v1/models`` and a
close, and prints the gateway's RSS (from ``/proc``) as it goes, with ``--plain`` the same over
plain HTTP for comparison, and with ``--baseline DIR`` the gateway of another checkout (say the
commit before a change) in the same run.

Run: ``python bench/gateway_tls_memory.py`` (``--help`` for options). Not a test: memory is a
figure, recorded in docs/benchmarks.md ("The gateway's memory over TLS connections").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import ssl
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.certs import GATEWAY_URI, client_context, new_ca, write_tls_dir
from tests.support.processes import Server, ankka_command, start


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def one(port: int, context: ssl.SSLContext | None) -> bool:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="localhost" if context else None
    )
    try:
        writer.write(b"GET /v1/models HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n")
        answer = await reader.read()
        return answer.startswith(b"HTTP/1.1 200")
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()


async def drive(
    name: str, server: Server, context: ssl.SSLContext | None, args: argparse.Namespace
) -> list[float]:
    port = int(server.url.rsplit(":", 1)[1])
    pid = server.process.pid
    gate = asyncio.Semaphore(args.concurrency)
    done = failed = 0
    marks: list[float] = [rss_mb(pid)]
    step = max(1, args.connections // args.points)
    started = time.monotonic()

    async def guarded() -> None:
        nonlocal done, failed
        async with gate:
            try:
                ok = await one(port, context)
            except (OSError, ssl.SSLError):
                ok = False
        done += 1
        failed += not ok
        if done % step == 0:
            marks.append(rss_mb(pid))

    await asyncio.gather(*(guarded() for _ in range(args.connections)))
    seconds = time.monotonic() - started
    shown = " ".join(f"{m:.0f}" for m in marks)
    print(
        f"{name:9} {args.connections} connections in {seconds:.0f} s, {failed} failed; "
        f"RSS MB every {step}: {shown}; growth {marks[-1] - marks[0]:+.0f} MB",
        flush=True,
    )
    return marks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/gateway_tls_memory.py", description=__doc__)
    parser.add_argument("--connections", type=int, default=35_000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--points", type=int, default=7, help="RSS readings along the way")
    parser.add_argument("--plain", action="store_true", help="also over plain HTTP")
    parser.add_argument(
        "--baseline", type=Path, metavar="DIR", help="also the gateway of this checkout"
    )
    args = parser.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ca = new_ca()
        tls_dir = write_tls_dir(
            work / "tls", leaf=ca.issue(GATEWAY_URI, server=True), ca_pem=ca.pem
        )
        client = client_context(ca, ca.issue("ankka://service/bench/caller"), work)
        models = work / "models.yaml"
        # An openai-kind model is never probed: the gateway is ready at once, nothing upstream.
        models.write_text(
            json.dumps(
                {
                    "models": [
                        {
                            "name": "bench",
                            "kind": "openai",
                            "url": "http://127.0.0.1:9",
                            "capabilities": ["completion"],
                        }
                    ]
                }
            )
        )
        runs: list[tuple[str, list[str], Path | None, ssl.SSLContext | None]] = [
            ("tls", ["--tls-dir", str(tls_dir)], None, client)
        ]
        if args.baseline is not None:
            runs.append(("baseline", ["--tls-dir", str(tls_dir)], args.baseline.resolve(), client))
        if args.plain:
            runs.append(("plain", ["--insecure"], None, None))
        load = os.getloadavg()
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
            f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; concurrency {args.concurrency}"
        )
        for name, mode, cwd, context in runs:
            command = ankka_command(
                "gateway", "--models", str(models), *mode, "--host", "127.0.0.1", "--port", "0"
            )
            server = start(command, cwd=cwd)
            try:
                asyncio.run(drive(name, server, context, args))
            finally:
                server.stop()
        load = os.getloadavg()
        print(f"load average at the end {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
