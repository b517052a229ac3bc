"""Declaring teams and moderated conversations (docs/teams.md). Pure: no I/O.

A :class:`Team` is a lead and members, autonomous agents of the same service, over a shared
backlog whose items are worked as tasks (:mod:`ankka.runtime.drivers.teams`). A
:class:`Conversation` is several agents in one shared session, a moderator choosing who
speaks next: :class:`RoundRobin`, :class:`Selector` (a model chooses), or a function of the
transcript (:class:`Moderated`). The service registers both (``service.team(...)``,
``service.conversation(...)``); their names are wire names, in routes and in the store.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.declare.autonomous import AutonomousAgent
from ankka.runtime.records.tasks import check_id

__all__ = [
    "EVERYONE",
    "LEAD_TOOLS",
    "SEND_MESSAGE",
    "Conversation",
    "EndReason",
    "Moderated",
    "Moderator",
    "Policy",
    "RoundRobin",
    "Selector",
    "Spoken",
    "Team",
    "agent_name",
]

# The backlog tools a team's lead gets on its tasks (docs/teams.md, "The lead plans"): names
# its own tools may not take.
LEAD_TOOLS = ("backlog_add_item", "backlog_cancel_item", "backlog_prioritise_item")
# The tool the lead and every member get to message the team (docs/teams.md, "Team
# messages"): a name their own tools may not take; and the recipient naming every agent of
# the team, a name none of them may take.
SEND_MESSAGE = "team_send_message"
EVERYONE = "everyone"
MAX_MEMBERS = 32
MAX_SPEAKERS = 16
MAX_TURNS = 200
MAX_TOOL_ROUNDS = 20


def agent_name(agent: AutonomousAgent | str, where: str) -> str:
    """The name of an agent given as itself or by name."""
    if isinstance(agent, AutonomousAgent):
        return agent.name
    if isinstance(agent, str) and agent:
        return agent
    raise ConfigurationError(f"{where}: name an autonomous agent (or give it), not {agent!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Team:
    """A lead and members over one backlog. ``iterations`` and ``tokens`` are the backlog's
    budget: every item's task is granted at most what remains of it (None: the item's type's
    budget alone bounds it). ``instances``: how many member instances of each member one
    runtime process runs, each holding at most one claim at a time."""

    name: str
    lead: AutonomousAgent | str
    members: Sequence[AutonomousAgent | str]
    description: str = ""
    iterations: int | None = None
    tokens: int | None = None
    instances: int = 1

    def __post_init__(self) -> None:
        where = f"team {self.name!r}"
        check_id(self.name, "team name")
        object.__setattr__(self, "lead", agent_name(self.lead, where))
        names = tuple(agent_name(m, where) for m in self.members)
        if not names:
            raise ConfigurationError(f"{where} has no members; give it members=[...]")
        if len(names) > MAX_MEMBERS or len(set(names)) != len(names):
            raise ConfigurationError(f"{where}: at most {MAX_MEMBERS} members, each once")
        object.__setattr__(self, "members", names)
        if EVERYONE in (self.lead, *names):
            raise ConfigurationError(
                f"{where}: an agent named {EVERYONE!r} cannot be on a team: a message to "
                f"{EVERYONE!r} is one to every agent of the team"
            )
        for value, what in ((self.iterations, "iterations"), (self.tokens, "tokens")):
            if value is not None and value < 1:
                raise ConfigurationError(f"{where}: {what} must be at least 1 (or None)")
        if not 1 <= self.instances <= 16:
            raise ConfigurationError(f"{where}: instances must be 1 to 16")

    @property
    def member_names(self) -> tuple[str, ...]:
        return tuple(str(m) for m in self.members)


class EndReason(enum.StrEnum):
    """Why a moderated conversation ended: every end says one of these."""

    MODERATOR = "moderator"  # the moderator chose to end it
    MAX_TURNS = "max_turns"  # the rule's turn limit was reached
    BUDGET_EXHAUSTED = "budget_exhausted"  # its token budget was spent
    DEADLINE_EXCEEDED = "deadline_exceeded"  # its deadline passed
    SPEAKER_SILENT = "speaker_silent"  # a speaker said nothing, and the policy ends it
    SPEAKER_FAILED = "speaker_failed"  # a speaker's turn failed, and the policy ends it
    UNKNOWN_SPEAKER = "unknown_speaker"  # the moderator named no speaker of the conversation
    INTERRUPTED = "interrupted"  # cut off mid-run (stopped, caller left); another message came


@dataclass(frozen=True, slots=True)
class Spoken:
    """One turn of the transcript a moderator is shown: who spoke (``user`` for the
    message that started it) and what they said."""

    speaker: str
    text: str


@dataclass(frozen=True, slots=True)
class RoundRobin:
    """Each speaker in the declared order, starting again after the last."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Selector:
    """A model chooses the next speaker from the transcript: it answers one speaker's name,
    or ``END`` to end the conversation."""

    model: str = "default"
    instructions: str = ""


@dataclass(frozen=True, slots=True)
class Moderated:
    """A function of the transcript and the speakers chooses: a speaker's name, or None to
    end the conversation."""

    choose: Callable[[Sequence[Spoken], Sequence[str]], str | None]


Moderator: TypeAlias = RoundRobin | Selector | Moderated
Policy: TypeAlias = Literal["skip", "end"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversation:
    """Several agents in one shared session; ``moderator`` chooses who speaks next.

    It ends by the moderator, after ``max_turns`` turns (spoken or skipped), when its
    ``tokens`` are spent, or at its ``deadline`` (seconds, the whole conversation). A speaker
    that says nothing within ``turn_deadline`` is silent; ``on_silent`` and ``on_failure``
    (a turn that failed) and ``on_unknown`` (the moderator named no speaker of this
    conversation) skip to the next turn or end the conversation, saying why. A speaker uses
    its agent's tools (its Python tools and MCP servers' tools), at most ``max_tool_rounds``
    answers asking for tools in one turn (more: its turn has failed, saying so).
    """

    name: str
    speakers: Sequence[AutonomousAgent | str]
    moderator: Moderator = field(default_factory=RoundRobin)
    instructions: str = ""
    max_turns: int = 12
    deadline: float = 300.0
    turn_deadline: float = 60.0
    tokens: int | None = None
    on_silent: Policy = "skip"
    on_failure: Policy = "skip"
    on_unknown: Policy = "end"
    max_tool_rounds: int = 4

    def __post_init__(self) -> None:
        where = f"conversation {self.name!r}"
        check_id(self.name, "conversation name")
        names = tuple(agent_name(s, where) for s in self.speakers)
        if not 1 <= len(names) <= MAX_SPEAKERS or len(set(names)) != len(names):
            raise ConfigurationError(f"{where}: 1 to {MAX_SPEAKERS} speakers, each once")
        object.__setattr__(self, "speakers", names)
        if callable(self.moderator) and not isinstance(
            self.moderator, RoundRobin | Selector | Moderated
        ):
            object.__setattr__(self, "moderator", Moderated(self.moderator))
        if not isinstance(self.moderator, RoundRobin | Selector | Moderated):
            raise ConfigurationError(
                f"{where}: moderator takes RoundRobin(), Selector(...) or a function"
            )
        if not 1 <= self.max_turns <= MAX_TURNS:
            raise ConfigurationError(f"{where}: max_turns must be 1 to {MAX_TURNS}")
        if not 0 < self.turn_deadline <= self.deadline <= 3600:
            raise ConfigurationError(
                f"{where}: 0 < turn_deadline <= deadline <= 3600 seconds, not "
                f"{self.turn_deadline} and {self.deadline}"
            )
        if self.tokens is not None and self.tokens < 1:
            raise ConfigurationError(f"{where}: tokens must be at least 1 (or None)")
        rounds = self.max_tool_rounds
        if (
            isinstance(rounds, bool)
            or not isinstance(rounds, int)
            or not 0 <= rounds <= MAX_TOOL_ROUNDS
        ):
            raise ConfigurationError(
                f"{where}: max_tool_rounds must be a whole number from 0 to {MAX_TOOL_ROUNDS}, "
                f"not {rounds!r}"
            )
        for policy in (self.on_silent, self.on_failure, self.on_unknown):
            if policy not in ("skip", "end"):
                raise ConfigurationError(f"{where}: a policy is 'skip' or 'end', not {policy!r}")

    @property
    def speaker_names(self) -> tuple[str, ...]:
        return tuple(str(s) for s in self.speakers)
