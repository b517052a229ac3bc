"""The moderated conversations of the moderation tests: three speakers (``ann``, ``bob``,
``cy``) of one model, in conversations that differ only in their moderator and policies."""

from __future__ import annotations

from collections.abc import Sequence

from ankka.runtime.agents import Service
from ankka.runtime.tasks import Accepts, AutonomousAgent
from ankka.runtime.teams import Conversation, RoundRobin, Selector, Spoken
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
        "turn_deadline": 2.0,
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
