"""Declaring agents and services; the :class:`Turn` a handler returns.

A service groups agents. An agent is a name and a handler; the handler receives the request
(:class:`TurnRequest`) and returns a :class:`Turn`: a description of what the platform should
do (instructions, message, tools, guardrails, memory, answer shape, model). Building it does no
I/O, so the platform may build it again (an approval resumes a turn that way)::

    service = Service("weather")

    @service.agent("weather")
    def weather(request: TurnRequest) -> Turn:
        return Turn(message=request.message, instructions="...", tools=[get_weather])

The loop itself (``ankka.runtime.engine.loop``) belongs to the platform.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from pydantic import BaseModel

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.declare.autonomous import AutonomousAgent
from ankka.runtime.declare.compaction import Compaction
from ankka.runtime.declare.guardrails import AnyGuardrail, Guardrail
from ankka.runtime.declare.judgments.plan import JudgmentDeclaration, JudgmentHandler
from ankka.runtime.declare.mcp import McpServer, normalise
from ankka.runtime.declare.policy import Access, SessionPolicy
from ankka.runtime.declare.teams import LEAD_TOOLS, SEND_MESSAGE, Conversation, Team
from ankka.runtime.declare.tools import RunnableTool

__all__ = [
    "Answer",
    "Compaction",
    "Memory",
    "Service",
    "Turn",
    "TurnRequest",
]

DEFAULT_MAX_TOOL_ROUNDS = 100

Answer: TypeAlias = Literal["text", "stream"] | type[BaseModel]


@dataclass(frozen=True, slots=True)
class Memory:
    """Which part of the session's conversation an agent reads.

    Filters keep whole turns, so a request never starts with a tool result or an answer whose
    question was cut away.
    """

    mode: Literal["all", "last", "agents", "none"] = "all"
    last_messages: int = 0
    agents: frozenset[str] = frozenset()

    @classmethod
    def all(cls) -> Memory:
        return cls("all")

    @classmethod
    def last(cls, messages: int) -> Memory:
        """The most recent ``messages`` messages, rounded down to whole turns."""
        if messages < 1:
            raise ConfigurationError(f"Memory.last needs at least 1 message, got {messages}")
        return cls("last", last_messages=messages)

    @classmethod
    def from_agents(cls, *names: str) -> Memory:
        """Only the turns handled by the named agents (their questions, tools and answers)."""
        if not names:
            raise ConfigurationError("Memory.from_agents needs at least one agent name")
        return cls("agents", agents=frozenset(names))

    @classmethod
    def none(cls) -> Memory:
        return cls("none")


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """What a handler is given: who is asked, in which session, and the message."""

    agent: str
    session: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """The effect a handler returns: everything the loop needs, and nothing it must do."""

    message: str
    instructions: str = ""
    tools: Sequence[RunnableTool] = ()
    input_guardrails: Sequence[AnyGuardrail] = ()
    output_guardrails: Sequence[AnyGuardrail] = ()
    # MCP servers' results (before the model or the journal sees them) and their tools'
    # descriptions (before they are offered); see docs/mcp.md.
    result_guardrails: Sequence[Guardrail] = ()
    description_guardrails: Sequence[Guardrail] = ()
    memory: Memory = field(default_factory=Memory.all)
    write_memory: bool = True
    answer: Answer = "text"
    model: str = "default"
    max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS
    reasoning_effort: str | None = None
    compaction: Compaction | None = None
    """How this session's memory is compacted once committed (``None``: the agent's
    declared default, if any). See :mod:`ankka.runtime.compaction`."""
    max_output_tokens: int | None = None
    """The most tokens each model answer of this turn may have, sent on every wire
    (``max_tokens``, Responses' ``max_output_tokens``, Anthropic's ``max_tokens``, capped by
    the model's ``_MAX_TOKENS``); ``None`` leaves it to the model's own setting."""

    def __post_init__(self) -> None:
        if self.max_tool_rounds < 0:
            raise ConfigurationError("max_tool_rounds cannot be negative")
        if self.max_output_tokens is not None and (
            isinstance(self.max_output_tokens, bool) or self.max_output_tokens < 1
        ):
            raise ConfigurationError(
                f"max_output_tokens must be a whole number of at least 1, not "
                f"{self.max_output_tokens!r}"
            )
        names = [t.name for t in self.tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigurationError(f"two tools share the name(s) {', '.join(duplicates)}")
        if not (
            self.answer in ("text", "stream")
            or (isinstance(self.answer, type) and issubclass(self.answer, BaseModel))
        ):
            raise ConfigurationError(
                f"answer must be 'text', 'stream' or a pydantic model class, not {self.answer!r}"
            )

    @property
    def streams(self) -> bool:
        return self.answer == "stream"

    @property
    def answer_type(self) -> type[BaseModel] | None:
        return self.answer if isinstance(self.answer, type) else None


Handler = Callable[[TurnRequest], Turn]


@dataclass(frozen=True, slots=True)
class AgentDeclaration:
    name: str
    handler: Handler
    description: str = ""
    mcp_servers: tuple[McpServer, ...] = ()
    compaction: Compaction | None = None
    access: Access | None = None


class Service:
    """A named set of agents; ``ankka serve MODULE:ATTR`` serves one.

    Request agents (:meth:`agent`) answer a caller who waits; autonomous agents
    (:meth:`autonomous`) work durable tasks. Their names share one namespace. ``access``
    says who besides a session's creator and the platform may act on the service's sessions
    (:mod:`ankka.runtime.declare.policy`); an agent's own ``access`` replaces it for that agent.
    """

    def __init__(self, name: str = "ankka", *, access: Access | None = None) -> None:
        self.name = name
        self.access = access
        self._agents: dict[str, AgentDeclaration] = {}
        self._judgments: dict[str, JudgmentDeclaration] = {}
        self._autonomous: dict[str, AutonomousAgent] = {}
        self._teams: dict[str, Team] = {}
        self._conversations: dict[str, Conversation] = {}

    @property
    def agents(self) -> dict[str, AgentDeclaration]:
        return dict(self._agents)

    @property
    def autonomous_agents(self) -> dict[str, AutonomousAgent]:
        return dict(self._autonomous)

    def autonomous(self, agent: AutonomousAgent) -> AutonomousAgent:
        """Declare an autonomous agent, which works tasks of the types it accepts."""
        self._refuse_taken(f"agent {agent.name!r}", agent.name)
        self._autonomous[agent.name] = agent
        return agent

    @property
    def teams(self) -> dict[str, Team]:
        return dict(self._teams)

    @property
    def conversations(self) -> dict[str, Conversation]:
        return dict(self._conversations)

    def team(self, team: Team) -> Team:
        """Declare a team over a backlog (docs/teams.md); its lead and members are autonomous
        agents declared here before it."""
        if team.name in self._teams:
            raise ConfigurationError(f"team {team.name!r} is declared twice in {self.name!r}")
        self._declared(f"team {team.name!r}", (str(team.lead), *team.member_names))
        lead = self._autonomous[str(team.lead)]
        taken = sorted({t.name for t in lead.tools} & set(LEAD_TOOLS))
        if taken:
            raise ConfigurationError(
                f"team {team.name!r}: its lead {lead.name!r} has a tool named "
                f"{', '.join(map(repr, taken))}, a name of the backlog tools a lead gets; "
                "rename that tool"
            )
        for name in (lead.name, *team.member_names):
            if any(t.name == SEND_MESSAGE for t in self._autonomous[name].tools):
                raise ConfigurationError(
                    f"team {team.name!r}: its agent {name!r} has a tool named "
                    f"{SEND_MESSAGE!r}, the name of the tool every agent of a team gets to "
                    "message it; rename that tool"
                )
        self._teams[team.name] = team
        return team

    def conversation(self, conversation: Conversation) -> Conversation:
        """Declare a moderated conversation among autonomous agents declared here before it."""
        name = conversation.name
        if name in self._conversations:
            raise ConfigurationError(f"conversation {name!r} is declared twice in {self.name!r}")
        self._declared(f"conversation {name!r}", conversation.speaker_names)
        self._conversations[name] = conversation
        return conversation

    def _declared(self, what: str, names: Sequence[str]) -> None:
        missing = sorted(set(names) - set(self._autonomous))
        if missing:
            raise ConfigurationError(
                f"{what} names {', '.join(map(repr, missing))}, not an autonomous agent of "
                f"{self.name!r}; declare it with service.autonomous(...) first"
            )

    def _refuse_taken(self, what: str, name: str) -> None:
        """Agents, autonomous agents and judgment handlers share one namespace (the routes)."""
        if name in self._agents or name in self._autonomous or name in self._judgments:
            raise ConfigurationError(f"{what} is declared twice in {self.name!r}")

    def agent(
        self,
        name: str,
        *,
        description: str = "",
        mcp_servers: Sequence[str | McpServer] = (),
        compaction: Compaction | None = None,
        access: Access | None = None,
    ) -> Callable[[Handler], Handler]:
        """Declare an agent whose handler builds each :class:`Turn`.

        ``mcp_servers`` names the MCP servers whose tools join every turn of the agent (as
        ``mcp__<server>__<tool>``); where they are comes from ``ANKKA_MCP_<SERVER>_URL``.
        ``compaction`` is the agent's compaction default for turns that set none.
        ``access``: who else may read, write or decide for its sessions
        (:class:`~ankka.runtime.declare.policy.Access`).
        """
        servers = normalise(mcp_servers, agent=name)

        def register(handler: Handler) -> Handler:
            doc = self._check_new(f"agent {name!r}", name, handler, description)
            self._agents[name] = AgentDeclaration(
                name, handler, doc, servers, compaction, _access(access, f"agent {name!r}")
            )
            return handler

        return register

    def judgment(
        self, name: str, *, description: str = ""
    ) -> Callable[[JudgmentHandler], JudgmentHandler]:
        """Declare a judgment handler whose handler builds each
        :class:`~ankka.runtime.declare.judgments.plan.JudgmentPlan` (served at
        ``POST /v1/agents/{name}/judgments``)."""

        def register(handler: JudgmentHandler) -> JudgmentHandler:
            doc = self._check_new(f"judgment {name!r}", name, handler, description)
            self._judgments[name] = JudgmentDeclaration(name, handler, doc)
            return handler

        return register

    def _check_new(
        self, what: str, name: str, handler: Callable[..., object], description: str
    ) -> str:
        """Refuse an async handler or a name already taken; the description to keep."""
        if inspect.iscoroutinefunction(handler):
            raise ConfigurationError(
                f"{what}: a handler builds a description and does no I/O; make it a plain "
                "function (put I/O in tools)"
            )
        self._refuse_taken(what, name)
        return description or inspect.getdoc(handler) or ""

    @property
    def judgments(self) -> dict[str, JudgmentDeclaration]:
        return dict(self._judgments)

    def judgment_declaration(self, name: str) -> JudgmentDeclaration | None:
        return self._judgments.get(name)

    def declaration(self, name: str) -> AgentDeclaration | None:
        return self._agents.get(name)

    def policy(self) -> SessionPolicy:
        """The session policy as declared (``ankka serve --access-file`` may override it)."""
        agents = {n: d.access for n, d in self._agents.items() if d.access is not None}
        agents.update({n: a.access for n, a in self._autonomous.items() if a.access is not None})
        service = _access(self.access, f"service {self.name!r}") or SessionPolicy().service
        return SessionPolicy(service, agents)


def _access(access: object, where: str) -> Access | None:
    if access is not None and not isinstance(access, Access):
        raise ConfigurationError(f"{where}: access= takes an Access(read=, write=, decide=)")
    return access
