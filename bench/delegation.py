"""Delegation's cost per child: a parent's delegating answer → the child's first model call,
against a plain task's creation → its first model call, in one run.

In one process, on a real store (SQLite with ``synchronous=FULL``; PostgreSQL from Debian's
server with ``--postgres``): a task host (the runtime's own scheduler, the default poll) and a
model at the boundary that answers at once and notes when each call arrives and when each
answer is returned (no HTTP: the model's wire is not what is measured). Agents ``l0`` …
``l<depth-1>``: each delegates ``--fanout`` children to the next level at once (one answer),
waits, then completes; the last level completes at once. ``--roots`` trees at a time.

Printed:

- per child: the parent's delegating answer returned → the child's first model call
  (p50/p99), every child of every tree, and its two parts: → the child's record made (its
  ``created_at``), and made → its first call;
- per plain task: ``host.put`` called → the task's first model call (p50/p99), the same
  number of tasks of the last level created ``--fanout`` at a time (as one answer makes them);
- children/s: the children of every tree over the wall clock (``time.time``, the records'
  clock) from the first root's creation to the last root's end.

``--sequential`` works the roots one after another (the per-child figure with only one
answer's children at work, like the plain tasks); without it every root starts at once (the
children/s of a whole forest, whose per-child figure is mostly queueing).

The peer, in the same run on each store: the same tree on pydantic-ai with its DBOS
integration (``bench/_dbos_delegation_peer.py``: each level a ``DBOSAgent``, a child an agent
run from a tool, a child workflow; DBOS's system database a SQLite file, or a database of the
same PostgreSQL server), in a venv of its own with pinned versions, made under
``~/.cache/ankka`` when missing (``--peer-python`` names another, ``--no-peer`` leaves it
out). Printed beside ankka's: its children/s and per-child overhead, and ankka's children/s
over the peer's.

Run: ``python bench/delegation.py [--roots 2 --fanout 4 --depth 4] [--postgres]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ankka.runtime.declare.agents import Service
from ankka.runtime.providers.base import ModelRequest, ModelResponse, TextDelta
from ankka.runtime.records.messages import AssistantMessage, ToolCall, Usage
from ankka.runtime.records.tasks import TaskSpec
from ankka.runtime.store.open import Store
from ankka.runtime.tasks import Accepts, AutonomousAgent, Delegate, TaskType
from tests.support.runtimes import make_context, task_host_for

_TASK = re.compile(r"^Task (\S+) \(type ")


class Done(BaseModel):
    note: str


def budgets(depth: int, fanout: int) -> list[int]:
    """Each level's budget: exactly what its subtree spends (a leaf one call, a parent two
    of its own and its children's), so every child gets its type's whole budget."""
    found = [1]
    for _ in range(depth - 1):
        found.insert(0, 2 + fanout * found[0])
    return found


def service_of(depth: int, fanout: int) -> Service:
    service = Service("bench-delegation")
    budget = budgets(depth, fanout)
    types = [TaskType(f"t{n}", description=f"level {n}", result=Done) for n in range(depth)]
    agents: list[AutonomousAgent] = []
    for level in reversed(range(depth)):
        delegates = [Delegate(agents[-1], types[level + 1])] if agents else []
        agents.append(
            service.autonomous(
                AutonomousAgent(
                    name=f"l{level}",
                    instructions="Delegate, then complete.",
                    accepts=[Accepts(types[level], budget=budget[level])],
                    delegates=delegates,
                    model="default",
                )
            )
        )
    return service


class TimedModel:
    """The model boundary: answers at once, noting each task's first call and each answer."""

    def __init__(self, depth: int, fanout: int) -> None:
        self.depth, self.fanout = depth, fanout
        self.first: dict[str, float] = {}
        self.delegated: dict[str, float] = {}  # a parent's delegating answer, returned

    @property
    def name(self) -> str:
        return "default"

    @property
    def model(self) -> str:
        return "bench"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        now = time.time()
        head = request.messages[0]
        match = _TASK.match(str(getattr(head, "content", "")))
        assert match, head
        task = match.group(1)
        asked = sum(isinstance(m, AssistantMessage) for m in request.messages)
        self.first.setdefault(task, now)
        tool = next((t.name for t in request.tools if t.name.startswith("delegate__")), None)
        if asked == 0 and tool is not None:
            calls = tuple(
                ToolCall(f"c{i}", tool, json.dumps({"instructions": f"part {i}"}))
                for i in range(self.fanout)
            )
            answer = ModelResponse(None, calls, Usage(10, 2), "bench")
            self.delegated[task] = time.time()
            return answer
        done = ToolCall("done", "complete_task", json.dumps({"note": "ok"}))
        return ModelResponse(None, (done,), Usage(10, 2), "bench")

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        yield await self.complete(request)

    async def aclose(self) -> None:
        return None


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {"p50_ms": 0.0, "p99_ms": 0.0, "n": 0}
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(p99 * 1000, 2),
        "n": len(ordered),
    }


def _parent_of(child: str) -> str:
    return child.rsplit(":", 1)[0]


async def run(
    store_url: str, roots: int, fanout: int, depth: int, *, sequential: bool
) -> dict[str, Any]:
    service = service_of(depth, fanout)
    model = TimedModel(depth, fanout)
    store = await Store.open(store_url)
    try:
        context = make_context(service, store=store.journal_store, providers={"default": model})
        async with context, task_host_for(context, store.tasks) as host:
            started = time.time()
            names = [f"root{n}" for n in range(roots)]
            for name in names:
                spec = TaskSpec("l0", "t0", "Work the tree.")
                await host.put("l0", name, spec, instance=None, created_by="local")
                if sequential:
                    await _completed(host, name)
            for name in names:
                await _completed(host, name)
            seconds = time.time() - started
            children = [t for t in model.first if ":" in t]
            overhead = [model.first[c] - model.delegated[_parent_of(c)] for c in children]
            made = {c: await _created(host, c) for c in children}
            to_made = [made[c] - model.delegated[_parent_of(c)] for c in children]
            to_call = [model.first[c] - made[c] for c in children]
            plain = await _plain(host, model, len(children), fanout, depth)
    finally:
        await store.close()
    return {
        "children": len(children),
        "child_overhead": _percentiles(overhead),
        "child_answer_to_created": _percentiles(to_made),
        "child_created_to_first_call": _percentiles(to_call),
        "plain_overhead": _percentiles(plain),
        "children_per_s": round(len(children) / seconds, 1),
        "seconds": round(seconds, 2),
    }


async def _completed(host: Any, task: str) -> None:
    record = await host.wait(task, 300)
    assert record.state.value == "completed", record


async def _created(host: Any, task: str) -> float:
    record = await host.get(task)
    assert record.created_at is not None
    return float(record.created_at.timestamp())


async def _plain(host: Any, model: TimedModel, count: int, fanout: int, depth: int) -> list[float]:
    """``count`` tasks of the last level, ``fanout`` at a time: creation → first model call."""
    leaf, kind = f"l{depth - 1}", f"t{depth - 1}"
    asked: dict[str, float] = {}
    for batch in range(0, count, fanout):
        names = [f"plain{n}" for n in range(batch, min(count, batch + fanout))]

        async def one(name: str) -> None:
            asked[name] = time.time()
            spec = TaskSpec(leaf, kind, "Plain.")
            await host.put(leaf, name, spec, instance=None, created_by="local")
            await host.wait(name, 300)

        await asyncio.gather(*(one(n) for n in names))
    return [model.first[n] - asked[n] for n in asked]


PEER_PINS = ("dbos==3.4.0", "pydantic-ai-slim[dbos]==2.62.0")
PEER_VENV = Path.home() / ".cache" / "ankka" / "dbos-venv-3.4.0-pai-2.62.0"


def peer_python() -> str:
    """The peer's interpreter: its venv, made (and the pinned versions installed) if missing."""
    python = PEER_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PEER_PINS], check=True)
    return str(python)


def peer(python: str, db: str, args: argparse.Namespace) -> dict[str, Any] | None:
    """The same tree on pydantic-ai + DBOS, its system database at ``db``."""
    command = [
        python, str(Path(__file__).with_name("_dbos_delegation_peer.py")), "--db", db,
        "--roots", str(args.roots), "--fanout", str(args.fanout), "--depth", str(args.depth),
    ]  # fmt: skip
    if args.sequential:
        command.append("--sequential")
    env = {**os.environ, "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600, env=env)
    if done.returncode != 0:
        print(f"the DBOS peer failed:\n{done.stderr[-3000:]}", file=sys.stderr)
        return None
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "children": found["children"],
        "child_overhead": _percentiles(found["overhead"]),
        "children_per_s": round(found["children"] / found["seconds"], 1),
        "seconds": round(found["seconds"], 2),
    }


def _beside(ours: dict[str, Any], theirs: dict[str, Any] | None) -> dict[str, Any]:
    if theirs is None:
        return ours
    ratio = ours["children_per_s"] / theirs["children_per_s"]
    return {**ours, "peer_dbos": theirs, "children_per_s_vs_peer": round(ratio, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/delegation.py")
    parser.add_argument("--roots", type=int, default=2)
    parser.add_argument("--fanout", type=int, default=4)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--postgres", action="store_true", help="also on Debian's PostgreSQL")
    parser.add_argument("--sequential", action="store_true", help="one root at a time")
    parser.add_argument("--no-peer", action="store_true", help="leave pydantic-ai + DBOS out")
    parser.add_argument("--peer-python", help="the peer's interpreter (default: its own venv)")
    args = parser.parse_args(argv)
    python = None if args.no_peer else (args.peer_python or peer_python())
    results: dict[str, Any] = {"load_average": os.getloadavg()}
    with tempfile.TemporaryDirectory() as work:
        url = f"sqlite:///{Path(work) / 'bench.sqlite3'}"
        results["sqlite"] = asyncio.run(
            run(url, args.roots, args.fanout, args.depth, sequential=args.sequential)
        )
        theirs = peer(python, f"sqlite:///{Path(work) / 'dbos.sqlite3'}", args) if python else None
        results["sqlite"] = _beside(results["sqlite"], theirs)
        if args.postgres:
            from tests.support.postgres import fresh_database, postgres_cluster

            with postgres_cluster(fsync=True) as dsn:
                results["postgresql"] = asyncio.run(
                    run(dsn, args.roots, args.fanout, args.depth, sequential=args.sequential)
                )
                db = fresh_database(dsn, "dbos") if python else None
                theirs = peer(python, db, args) if python and db else None
                results["postgresql"] = _beside(results["postgresql"], theirs)
    results["load_average_after"] = os.getloadavg()
    print(json.dumps({"args": vars(args), **results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
