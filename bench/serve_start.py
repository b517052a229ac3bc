"""``ankka serve`` start: process start → "listening" line → first ``200`` from ``/healthz``,
and then its first A2A request.

Runs ``ankka serve examples.weather:service --port 0`` --runs times (bounded), each on a fresh
temporary SQLite store, with one model configured (``ANKKA_MODEL_DEFAULT_*``, an
openai-compatible URL nobody answers: nothing calls it at start). Each run is timed from just
before the process is spawned to its "listening" line and to the first ``GET /healthz`` that
answers 200; then one ``GET /a2a/weather/.well-known/agent-card.json`` is timed (the first A2A
request builds the A2A routes, importing the a2a-sdk's server: what a start no longer does),
and the process is stopped with SIGTERM. Then --runs more starts under ``python -X importtime``:
the imports made before the "listening" line, summed (top-level modules' cumulative time, the
interpreter's own start included), and the heaviest top-level modules. ``-X importtime`` itself
slows importing, so that sum is an upper bound of the import share, not a part of the first
figure.

Printed: p50 / p90 / max of each (and the process's CPU seconds, start to shutdown with those
two requests, which a loaded machine inflates less than wall time), and the load average
before and after. With ``--baseline DIR`` another checkout (say main's) is started too,
alternating start by start.

Run: ``python bench/serve_start.py [--runs 20] [--baseline DIR]``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
TARGET = "examples.weather:service"
CARD = "/a2a/weather/.well-known/agent-card.json"
LISTENING = re.compile(r"listening on (http://\S+)")
IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)")
MAX_RUNS = 200
DEADLINE = 30.0


def _environment(checkout: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(checkout),
        "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
        "ANKKA_MODEL_DEFAULT_URL": "http://127.0.0.1:9/v1",
        "ANKKA_MODEL_DEFAULT_MODEL": "standin",
    }


def _command(store: Path, *, importtime: bool) -> list[str]:
    flags = ["-X", "importtime"] if importtime else []
    serve = ["serve", TARGET, "--port", "0", "--store", f"sqlite:///{store}"]
    return [sys.executable, *flags, "-m", "ankka", *serve]


def _until_listening(process: subprocess.Popen[str], began: float) -> tuple[str, float, list[str]]:
    """The URL and the seconds from ``began`` to the listening line, and the lines before it."""
    assert process.stdout is not None
    lines: list[str] = []
    while time.monotonic() - began < DEADLINE:  # bounded: readline returns at EOF
        line = process.stdout.readline()
        if not line:
            break
        match = LISTENING.search(line)
        if match:
            return match.group(1), time.monotonic() - began, lines
        lines.append(line)
    process.kill()
    raise RuntimeError(f"ankka serve did not listen within {DEADLINE}s:\n{''.join(lines)[-4000:]}")


def _healthy(client: httpx.Client, url: str, began: float) -> float:
    while time.monotonic() - began < DEADLINE:  # bounded by the deadline
        try:
            if client.get(f"{url}/healthz").status_code == 200:
                return time.monotonic() - began
        except httpx.TransportError:
            pass
        time.sleep(0.002)
    raise RuntimeError(f"{url}/healthz never answered 200 within {DEADLINE}s")


def _first_a2a(client: httpx.Client, url: str) -> float:
    """Seconds the first A2A request takes (the agent's card), from sending to the answer."""
    began = time.monotonic()
    answer = client.get(f"{url}{CARD}", timeout=DEADLINE)
    if answer.status_code != 200:
        raise RuntimeError(f"{CARD} answered {answer.status_code}: {answer.text[:500]}")
    return time.monotonic() - began


def _stop(process: subprocess.Popen[str]) -> float:
    """Stop it (SIGTERM, SIGKILL after 15 s) and return the CPU seconds its whole life took."""
    process.terminate()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:  # bounded by the deadline
        pid, _, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = 0  # reaped here: Popen must not wait for it again
            return usage.ru_utime + usage.ru_stime
        time.sleep(0.01)
    process.kill()
    _, _, usage = os.wait4(process.pid, 0)
    process.returncode = -9
    return usage.ru_utime + usage.ru_stime


Run = tuple[float, float, float, float, float, Counter[str]]


def _one(work: Path, checkout: Path, client: httpx.Client, *, importtime: bool) -> Run:
    """Seconds to listening and to /healthz, of the first A2A request, the process's CPU
    seconds (start, one /healthz, one A2A card, shutdown); with ``importtime`` also the
    imports' seconds before listening and each top-level module's cumulative microseconds."""
    store = work / f"store-{time.monotonic_ns()}.sqlite3"
    began = time.monotonic()
    process = subprocess.Popen(
        _command(store, importtime=importtime),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_environment(checkout),
        cwd=work,
    )
    try:
        url, listening, before = _until_listening(process, began)
        healthz = _healthy(client, url, began)
        a2a = _first_a2a(client, url)
    finally:
        cpu = _stop(process)
    top: Counter[str] = Counter()
    total = 0
    for line in before:
        match = IMPORT_LINE.match(line)
        if match and not match.group(3):  # a top-level import: its cumulative time counts
            total += int(match.group(2))
            top[match.group(4)] += int(match.group(2))
        if match:  # and each distribution's own time, its modules' self times summed
            top["package " + match.group(4).split(".")[0]] += int(match.group(1))
    return listening, healthz, a2a, cpu, total / 1e6, top


def _figures(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return (
        f"{name}: p50 {statistics.median(ordered) * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms, "
        f"max {ordered[-1] * 1000:.0f} ms (n={len(ordered)})"
    )


def _report(name: str, plain: list[Run], timed: list[Run]) -> None:
    print(f"{name}:")
    print("  " + _figures("start → listening", [r[0] for r in plain]))
    print("  " + _figures("start → /healthz 200", [r[1] for r in plain]))
    print("  " + _figures("then the first A2A request (a card)", [r[2] for r in plain]))
    print(
        "  " + _figures("CPU of the process (start, 2 requests, shutdown)", [r[3] for r in plain])
    )
    print("  " + _figures("under -X importtime: start → /healthz 200", [r[1] for r in timed]))
    print("  " + _figures("under -X importtime: imports before listening", [r[4] for r in timed]))
    heaviest: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    for run in timed:
        heaviest.update({k: v for k, v in run[5].items() if not k.startswith("package ")})
        packages.update({k: v for k, v in run[5].items() if k.startswith("package ")})
    print("  heaviest top-level imports before listening (mean cumulative, -X importtime):")
    for module, micros in heaviest.most_common(10):
        print(f"    {micros / len(timed) / 1000:7.1f} ms  {module}")
    print("  heaviest packages before listening (mean of their modules' own times):")
    for module, micros in packages.most_common(14):
        print(f"    {micros / len(timed) / 1000:7.1f} ms  {module.removeprefix('package ')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help=f"starts of each kind (≤ {MAX_RUNS})")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="also start DIR's checkout (`before`), alternating start by start with this one",
    )
    args = parser.parse_args()
    if not 1 <= args.runs <= MAX_RUNS:
        parser.error(f"--runs {args.runs}: give 1 to {MAX_RUNS}")
    checkouts = {"this checkout": REPO}
    if args.baseline is not None:
        checkouts = {f"baseline {args.baseline}": args.baseline.resolve(), **checkouts}
    print(f"load average before: {os.getloadavg()}")
    plain: dict[str, list[Run]] = {name: [] for name in checkouts}
    timed: dict[str, list[Run]] = {name: [] for name in checkouts}
    with tempfile.TemporaryDirectory(prefix="ankka-bench-start-") as tmp, httpx.Client() as client:
        work = Path(tmp)
        for _ in range(args.runs):
            for name, checkout in checkouts.items():
                plain[name].append(_one(work, checkout, client, importtime=False))
        for _ in range(args.runs):
            for name, checkout in checkouts.items():
                timed[name].append(_one(work, checkout, client, importtime=True))
    for name in checkouts:
        _report(name, plain[name], timed[name])
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
