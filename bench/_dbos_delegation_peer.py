"""The durable peer of ``bench/delegation.py``: the same tree on pydantic-ai + DBOS.

Run by the benchmark in the peer's own venv (pinned ``dbos`` and ``pydantic-ai-slim[dbos]``,
made under ``~/.cache/ankka`` by the benchmark): ``python bench/_dbos_delegation_peer.py --db
URL --roots R --fanout F --depth D [--sequential]``. Agents ``l0`` … ``l<depth-1>``, each a
pydantic-ai ``Agent`` wrapped in ``DBOSAgent`` (its run a DBOS workflow, every model request
a step checkpointed in the system database before the next): each but the last delegates
through a tool, ``delegate``, that runs the next level's agent (a child workflow, durable: an
agent called from a tool), ``--fanout`` calls in one answer (run at once, DBOS's
``parallel_ordered_events``), then gives its output; the last gives its output at once. The
model at the boundary is pydantic-ai's ``FunctionModel``, which answers at once and notes when
each run's first request arrives and when each delegating answer is returned, as the
benchmark's own model does. Prints one JSON line: ``{"children", "seconds", "overhead"}``
(each child's delegating answer returned → its first model request, in seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from typing import Any

from dbos import DBOS
from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.durable_exec.dbos import DBOSAgent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

_TASK = re.compile(r"^Task (\S+):")
# The tree's runs share its usage (as ankka's budget covers a tree); no limit on its requests.
UNLIMITED = UsageLimits(request_limit=None)


class Done(BaseModel):
    note: str


class Timed:
    """The model: answers at once, noting each run's first request and delegating answer."""

    def __init__(self, fanout: int) -> None:
        self.fanout = fanout
        self.first: dict[str, float] = {}
        self.delegated: dict[str, float] = {}

    async def answer(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        now = time.time()
        prompt = next(
            p.content
            for m in messages
            for p in getattr(m, "parts", ())
            if isinstance(p, UserPromptPart)
        )
        match = _TASK.match(str(prompt))
        assert match, prompt
        task = match.group(1)
        self.first.setdefault(task, now)
        asked = sum(isinstance(m, ModelResponse) for m in messages)
        tools = [t.name for t in info.function_tools]
        if asked == 0 and "delegate" in tools:
            calls = [
                ToolCallPart("delegate", {"instructions": f"Task {task}.{i}: part {i}"}, f"c{i}")
                for i in range(self.fanout)
            ]
            self.delegated[task] = time.time()
            return ModelResponse(parts=calls)
        output = info.output_tools[0].name
        return ModelResponse(parts=[ToolCallPart(output, {"note": "ok"}, "done")])


def delegating(agent: Agent[None, Done], child: DBOSAgent[None, Done]) -> None:
    """Give ``agent`` the tool ``delegate``: it runs ``child`` (a child workflow)."""

    @agent.tool  # type: ignore[untyped-decorator]
    async def delegate(ctx: RunContext[None], instructions: str) -> str:
        """Give a part of the work to the next level's agent."""
        result = await child.run(instructions, usage=ctx.usage, usage_limits=UNLIMITED)
        return str(result.output.note)


def tree(depth: int, model: FunctionModel) -> DBOSAgent[None, Done]:
    """The agents, the last level first; the root's durable agent."""
    below: DBOSAgent[None, Done] | None = None
    for level in reversed(range(depth)):
        agent: Agent[None, Done] = Agent(
            model, name=f"l{level}", output_type=Done, instructions="Delegate, then complete."
        )
        if below is not None:
            delegating(agent, below)
        below = DBOSAgent(agent)
    assert below is not None
    return below


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True, help="the system database's URL")
    parser.add_argument("--roots", type=int, default=2)
    parser.add_argument("--fanout", type=int, default=4)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--sequential", action="store_true")
    args = parser.parse_args()
    timed = Timed(args.fanout)
    root = tree(args.depth, FunctionModel(timed.answer, model_name="bench"))
    DBOS(
        config={"name": "bench-delegation", "system_database_url": args.db, "log_level": "WARNING"}
    )
    DBOS.launch()
    started = time.time()
    runs = [f"Task root{n}: work the tree." for n in range(args.roots)]
    results: list[Any] = []
    if args.sequential:
        for prompt in runs:
            results.append(await root.run(prompt, usage_limits=UNLIMITED))
    else:
        results = list(await asyncio.gather(*(root.run(p, usage_limits=UNLIMITED) for p in runs)))
    seconds = time.time() - started
    DBOS.destroy()
    assert all(r.output.note == "ok" for r in results)
    children = [t for t in timed.first if "." in t]
    overhead = [timed.first[c] - timed.delegated[c.rsplit(".", 1)[0]] for c in children]
    print(json.dumps({"children": len(children), "seconds": seconds, "overhead": overhead}))


if __name__ == "__main__":
    asyncio.run(main())
