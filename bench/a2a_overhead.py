"""A2A's cost over ankka's own API: one request agent, one ``ankka serve``, one run.

Each round sends one turn in a fresh session three ways, one after another (so load from
elsewhere on the machine falls on all alike), each over a keep-alive HTTP connection:

- ``ankka API``: ``POST /v1/agents/plain/sessions/{s}`` ``{"message"}``;
- ``A2A``: JSON-RPC ``SendMessage`` to ``/a2a/plain`` (``A2A-Version: 1.0``), waiting for the
  completed task (the turn, then the task's row settled);
- ``a2a-sdk floor``: the same ``SendMessage`` to an agent built with the a2a-sdk alone
  (tests/support/a2a_sdk_server.py: it echoes, no model, tasks in memory), the least an A2A
  round trip costs on this machine with the SDK's server.

The model is the stand-in on loopback, one text answer per turn. Printed: p50/p99 per way,
the ratio A2A / ankka API at p50 (the goal: at most 1.1), and the load average. Run it under
``flock /tmp/ankka-bench.lock`` on a quiet machine: ``python bench/a2a_overhead.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.processes import ankka_command, start

SERVICE = "bench.a2a_service:service"


def _rpc(message_id: str, context: str) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": message_id,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": message_id,
                "contextId": context,
                "role": "ROLE_USER",
                "parts": [{"text": "What is the weather in Helsinki?"}],
            }
        },
    }


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    args = parser.parse_args()
    total = args.rounds + args.warmup
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps([{"text": "Sunny, 21."} for _ in range(3 * total)]))
        standin = start(ankka_command("standin", "--script", str(script), "--port", "0"))
        env = {
            "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
            "ANKKA_MODEL_DEFAULT_URL": f"{standin.url}/v1",
            "ANKKA_MODEL_DEFAULT_MODEL": "standin",
        }
        store = f"sqlite:///{Path(tmp) / 'bench.sqlite3'}"
        serve = start(ankka_command("serve", SERVICE, "--port", "0", "--store", store), env=env)
        floor = start([sys.executable, "-m", "tests.support.a2a_sdk_server", "--port", "0"])
        times: dict[str, list[float]] = {"ankka API": [], "A2A": [], "a2a-sdk floor": []}
        try:
            with httpx.Client(headers={"A2A-Version": "1.0"}, timeout=30) as client:
                for n in range(total):
                    ways = {
                        "ankka API": (
                            f"{serve.url}/v1/agents/plain/sessions/api-{n}",
                            {"message": "What is the weather in Helsinki?"},
                        ),
                        "A2A": (f"{serve.url}/a2a/plain", _rpc(f"a2a-{n}", f"a2a-ctx-{n}")),
                        "a2a-sdk floor": (f"{floor.url}/", _rpc(f"sdk-{n}", f"sdk-ctx-{n}")),
                    }
                    for name, (url, body) in ways.items():
                        began = time.perf_counter()
                        answer = client.post(url, json=body)
                        spent = time.perf_counter() - began
                        answer.raise_for_status()
                        if "error" in answer.json():
                            raise SystemExit(f"{name}: {answer.text[:300]}")
                        if n >= args.warmup:
                            times[name].append(spent * 1000)
        finally:
            for server in (floor, serve, standin):
                server.stop()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.rounds} rounds (after {args.warmup} to warm up); load average {load}")
    print("| way | p50 ms | p99 ms | mean ms |")
    print("|---|---|---|---|")
    for name, values in times.items():
        mean = statistics.fmean(values)
        print(f"| {name} | {_p(values, 0.5):.2f} | {_p(values, 0.99):.2f} | {mean:.2f} |")
    ratio = _p(times["A2A"], 0.5) / _p(times["ankka API"], 0.5)
    print(f"A2A / ankka API at p50: {ratio:.2f}x (goal <= 1.1x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
