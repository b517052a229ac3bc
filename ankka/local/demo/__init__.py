"""What ``ankka up`` serves when no MODULE is named: it ships in the package, so
``pip install ankka && ankka up`` works from any directory.

- ``weather`` answers about the weather with its tool ``get_weather`` (the stand-in's script
  asks it the README's question);
- ``chat`` is a plain conversation with no tools, for a model that cannot call tools (SmolLM2
  under ``ankka up --model local``);
- ``researcher`` is an autonomous agent working ``summary`` tasks with its tool ``lookup``.

``standin.json`` beside this file is the stand-in model's script for it (:func:`script`). The
clone's ``examples/weather.py`` and ``examples/tasks.py`` are the same weather agent and
researcher written to be read and copied; ``examples/up_service.py`` serves this module (a
test keeps the clone's ``examples/up-standin.json`` equal to ``standin.json``). The package
cannot import the clone's ``examples/``, which is not installed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from pydantic import BaseModel

from ankka.runtime.agents import Service, Turn, TurnRequest
from ankka.runtime.tasks import Accepts, AutonomousAgent, TaskType
from ankka.runtime.tools import tool

__all__ = ["SCRIPT_NAME", "TARGET", "Summary", "script", "service"]

TARGET = "ankka.local.demo:service"
SCRIPT_NAME = "standin.json"  # beside this file; opened by script()

service = Service("platform")

# Fixed tables keep the demo deterministic and offline; real tools would call an API.
_FORECASTS = {"helsinki": "-3 °C, light snow", "oslo": "1 °C, overcast", "lisbon": "17 °C, sunny"}
_NOTES = {
    "ankka": "ankka is an agent platform for Kubernetes, in Python.",
    "sqlite": "SQLite is an embedded database kept in one file.",
    "postgresql": "PostgreSQL is a database server shared by many processes.",
}


def _known(table: dict[str, str], key: str, what: str) -> str:
    found = table.get(key.strip().lower())
    if found is None:
        raise ValueError(f"{what} {key!r}; known: {', '.join(table)}")
    return found


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"{city}: {_known(_FORECASTS, city, 'no weather station for')}"


@tool
def lookup(topic: str) -> str:
    """What is known about a topic."""
    return _known(_NOTES, topic, "nothing known about")


@service.agent("weather", description="Answers questions about the weather.")
def weather(request: TurnRequest) -> Turn:
    return Turn(
        message=request.message,
        instructions="You answer questions about the weather. Use get_weather for every city "
        "you are asked about, then answer in one sentence.",
        tools=[get_weather],
        model="default",
    )


@service.agent("chat", description="A plain conversation (no tools), for any model.")
def chat(request: TurnRequest) -> Turn:
    return Turn(
        message=request.message,
        instructions="You are a helpful assistant. Answer briefly.",
        model="default",
    )


class Summary(BaseModel):
    title: str
    points: list[str]


def _has_points(result: Summary) -> str | None:
    return None if result.points else "a summary needs at least one point"


service.autonomous(
    AutonomousAgent(
        name="researcher",
        description="Researches a topic and summarises it.",
        instructions="You research topics. Look each topic up with lookup, then finish with "
        "complete_task. If a topic cannot be looked up, finish with fail_task and say why.",
        tools=[lookup],
        accepts=[
            Accepts(
                TaskType(
                    "summary",
                    description="Summarise a topic as a title and a list of short points.",
                    result=Summary,
                    rules=[_has_points],
                ),
                budget=5,
            )
        ],
        model="default",
    )
)


@contextlib.contextmanager
def script() -> Iterator[Path]:
    """The stand-in's script for this service, as a file for as long as the block runs."""
    # Literal names: the package test finds the files the code opens by reading these calls.
    with resources.as_file(resources.files("ankka.local.demo").joinpath("standin.json")) as path:
        yield path
