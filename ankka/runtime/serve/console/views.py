"""What the console shows of a session, built from the runtime's read API's values.

Pure: :func:`session_view` takes the conversation (:meth:`Runtime.messages`) and the summary
(:meth:`Runtime.summary`) and groups the messages by turn, with each turn's tool calls, model
calls and token use, and the session's tokens per agent and model. Cost is never computed:
there is no price table, so it is shown as unknown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ankka.runtime.drivers.request import SessionSummary
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    ModelCall,
    SummaryMessage,
    ToolCall,
    Usage,
)

__all__ = ["AgentModelUsage", "SessionView", "TurnView", "session_view"]


@dataclass(frozen=True, slots=True)
class TurnView:
    turn: str
    agent: str
    messages: tuple[Message, ...]
    tool_calls: tuple[ToolCall, ...]
    calls: tuple[ModelCall, ...]
    usage: Usage  # the turn's own sum (the last answer's turn_usage), zero while unanswered
    at: datetime | None = None  # when it began (its first record's time), when known


@dataclass(frozen=True, slots=True)
class AgentModelUsage:
    agent: str
    model: str
    calls: int
    usage: Usage


@dataclass(frozen=True, slots=True)
class SessionView:
    session: str
    summary: SessionSummary
    turns: tuple[TurnView, ...]
    by_agent_model: tuple[AgentModelUsage, ...]
    summaries: tuple[SummaryMessage, ...] = field(default=())


def _turns(messages: Sequence[Message], times: Mapping[str, datetime]) -> list[TurnView]:
    order: list[str] = []
    grouped: dict[str, list[Message]] = {}
    for message in messages:
        if isinstance(message, SummaryMessage):
            continue
        key = message.turn or f"(message {len(order)})"
        if key not in grouped:
            order.append(key)
            grouped[key] = []
        grouped[key].append(message)
    views = []
    for key in order:
        items = grouped[key]
        answers = [m for m in items if isinstance(m, AssistantMessage)]
        usage = next((m.turn_usage for m in reversed(answers) if m.turn_usage), None)
        agent = next((m.agent for m in items if m.agent), "")
        views.append(
            TurnView(
                turn=key,
                agent=agent,
                messages=tuple(items),
                tool_calls=tuple(c for m in answers for c in m.tool_calls),
                calls=tuple(m.call for m in answers if m.call is not None),
                usage=usage or Usage(),
                at=times.get(key),
            )
        )
    return views


def _by_agent_model(turns: Sequence[TurnView]) -> list[AgentModelUsage]:
    sums: dict[tuple[str, str], tuple[int, Usage]] = {}
    for turn in turns:
        for call in turn.calls:
            count, usage = sums.get((call.agent, call.model), (0, Usage()))
            sums[(call.agent, call.model)] = (count + 1, usage + call.usage)
    return [AgentModelUsage(a, m, n, u) for (a, m), (n, u) in sorted(sums.items())]


def session_view(
    session: str,
    messages: Sequence[Message],
    summary: SessionSummary,
    *,
    as_sent: Sequence[Message] = (),
    times: Mapping[str, datetime] | None = None,
) -> SessionView:
    """``as_sent`` (the view the model is shown) supplies the compaction summaries, if any;
    ``times``, when each turn began (turn id → time)."""
    turns = _turns(messages, times or {})
    return SessionView(
        session=session,
        summary=summary,
        turns=tuple(turns),
        by_agent_model=tuple(_by_agent_model(turns)),
        summaries=tuple(m for m in as_sent if isinstance(m, SummaryMessage)),
    )
