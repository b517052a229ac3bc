"""The durable peer of ``bench/task_throughput.py``: the same agent on pydantic-ai + DBOS.

Run by the benchmark in the venv that has the peer (``pydantic-ai-slim[openai,dbos]``, extra
``bench-dbos``): ``python bench/_dbos_peer.py --url STANDIN --tasks N --concurrency C --db
PATH``. The agent is the researcher of ``examples/tasks.py`` (a ``lookup`` tool, a ``Summary``
result) wrapped in pydantic-ai's ``DBOSAgent``: every model request and tool call is a DBOS
step, checkpointed in the SQLite system database before the next. Prints one JSON line:
``{"tasks", "seconds", "completed"}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from dbos import DBOS
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSAgent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


class Summary(BaseModel):
    title: str
    points: list[str]


def lookup(topic: str) -> str:
    """What is known about a topic."""
    return f"{topic} is an agent platform for Kubernetes, in Python."


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--db", required=True)
    args = parser.parse_args()
    model = OpenAIChatModel(
        "standin", provider=OpenAIProvider(base_url=f"{args.url}/v1", api_key="none")
    )
    agent: Agent[None, Summary] = Agent(
        model,
        name="researcher",
        output_type=Summary,
        tools=[lookup],
        instructions="Look the topic up, then give the summary.",
    )
    durable = DBOSAgent(agent)
    DBOS(
        config={
            "name": "bench",
            "system_database_url": f"sqlite:///{args.db}",
            "log_level": "WARNING",
        }
    )
    DBOS.launch()
    gate = asyncio.Semaphore(args.concurrency)
    completed = 0

    async def one(n: int) -> None:
        nonlocal completed
        async with gate:
            result: Any = await durable.run(f"Task t{n}: summarise ankka.")
            if isinstance(result.output, Summary):
                completed += 1

    started = time.perf_counter()
    await asyncio.gather(*(one(n) for n in range(args.tasks)))
    seconds = time.perf_counter() - started
    DBOS.destroy()
    print(json.dumps({"tasks": args.tasks, "seconds": seconds, "completed": completed}))


if __name__ == "__main__":
    asyncio.run(main())
