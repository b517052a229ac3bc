"""The moderated conversations of the moderation tests: three speakers (``ann``, ``bob``,
``cy``) of one model, in conversations that differ only in their moderator and policies; and
``dee``, a speaker with tools (``note``, which logs each run to ``$ANKKA_TEST_TOOL_LOG``, and
``publish``, which needs a person's approval), in ``tooled``; and ``eve``, whose tool
``linger`` is slow to stop (told to, it waits as long again), alone in ``lingering``."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path

from ankka.runtime.agents import Service
from ankka.runtime.tasks import Accepts, AutonomousAgent
from ankka.runtime.teams import Conversation, RoundRobin, Selector, Spoken
from ankka.runtime.tools import tool
from examples.tasks import summary

service = Service("moderation")

SPEAKERS = [
    service.autonomous(
        AutonomousAgent(
            name=name,
            instructions=f"You are {name}.",
            accepts=[Accepts(summary, budget=2)],
            model="default",
        )
    )
    for name in ("ann", "bob", "cy")
]


def _logged(line: str) -> None:
    log = os.environ.get("ANKKA_TEST_TOOL_LOG")
    if log:
        with Path(log).open("a") as out:
            out.write(line + "\n")


@tool
def note(topic: str) -> str:
    """What is known about a topic (each run is logged)."""
    _logged(f"note {topic}")
    return f"{topic}: an embedded SQL database in one file"


@tool(requires_approval=True)
def publish(text: str) -> str:
    """Publish a text (a person approves each call)."""
    _logged(f"publish {text}")
    return "published"


@tool
async def linger(seconds: float) -> str:
    """Wait ``seconds``; cancelled, wait as long again before stopping (its clean-up), unless
    cancelled again: a tool its turn's deadline does not stop in time."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _logged("linger told to stop")
        await asyncio.sleep(seconds)
        raise
    return "lingered"


EVE = service.autonomous(
    AutonomousAgent(
        name="eve",
        instructions="You are eve; you linger.",
        tools=[linger],
        accepts=[Accepts(summary, budget=2)],
        model="default",
    )
)


DEE = service.autonomous(
    AutonomousAgent(
        name="dee",
        instructions="You are dee; look things up with note.",
        tools=[note, publish],
        accepts=[Accepts(summary, budget=2)],
        model="default",
    )
)


def names_a_stranger(transcript: Sequence[Spoken], speakers: Sequence[str]) -> str | None:
    """Ann first, then someone not in the conversation."""
    return "ann" if len(transcript) == 1 else "mallory"


def ann_then_end(transcript: Sequence[Spoken], speakers: Sequence[str]) -> str | None:
    return "ann" if len(transcript) == 1 else None


def _conversation(name: str, **options: object) -> None:
    settings: dict[str, object] = {
        "moderator": RoundRobin(),
        "max_turns": 3,
        "deadline": 30.0,
        # A turn on the stand-in takes milliseconds; 8 s is for a loaded machine (at 2 s a
        # turn that answers at once was cut, at load 10), silence is a 30 s delay past it.
        "turn_deadline": 8.0,
        **options,
    }
    service.conversation(Conversation(name=name, speakers=SPEAKERS, **settings))  # type: ignore[arg-type]


_conversation("skipping")  # a silent or failing speaker is skipped
_conversation("strict", on_silent="end", on_failure="end")
_conversation("stranger", moderator=names_a_stranger, on_unknown="end")
_conversation("stranger-skipped", moderator=names_a_stranger, on_unknown="skip")
_conversation("chosen", moderator=ann_then_end)
_conversation("selected", moderator=Selector(model="default"), max_turns=5)
_conversation("short", deadline=3.0, turn_deadline=2.0, max_turns=10)
service.conversation(
    Conversation(
        name="tooled",
        speakers=[DEE, SPEAKERS[0]],
        max_turns=2,
        deadline=60.0,
        turn_deadline=30.0,
        max_tool_rounds=2,
    )
)
service.conversation(
    Conversation(name="lingering", speakers=[EVE], max_turns=1, deadline=2.0, turn_deadline=2.0)
)
