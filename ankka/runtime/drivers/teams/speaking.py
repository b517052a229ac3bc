"""One speaker's turn, and a selector's choice, in a moderated conversation: engine turns.

A speaker is shown the conversation from where it sits: its own earlier turns as its answers,
everyone else's as user messages naming who spoke (consecutive ones joined, so roles still
alternate), ending with the cue that it is its turn. The turn is one engine turn
(:func:`ankka.runtime.engine.loop.drive`) with the speaker's instructions, model and tools
(its agent's Python tools and the tools its MCP servers list, run by the one executor as any
turn's are): the same executor, retry policy and accounting as every other turn. Each answer
asking for tools and each tool result is handed to ``record`` as it comes (the caller
journals it), so a turn cut off is resumed from them: a recorded call is not made again. The
turn ends with an answer calling no tool; ``max_tool_rounds`` answers asking for tools at
most (one more: :class:`~ankka._kernel.errors.TurnFailed`, naming the bound). A call whose
tool needs a person's approval is not run: a turn cannot wait for one, so it is answered (and
recorded) as refused, saying why. Pure but for the model and tool calls; the caller bounds
the turn by its deadline and records its answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from ankka._kernel.errors import TurnFailed
from ankka.runtime.declare.autonomous import AutonomousAgent
from ankka.runtime.declare.teams import Conversation, Selector, Spoken
from ankka.runtime.declare.tools import RunnableTool
from ankka.runtime.drivers.context import Context
from ankka.runtime.engine.executor import Ledger
from ankka.runtime.engine.loop import drive
from ankka.runtime.engine.planning import provider_for
from ankka.runtime.engine.steps import (
    AwaitDecision,
    Finish,
    OutOfRounds,
    RunTool,
    TurnPlan,
    TurnState,
)
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    ModelCall,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ankka.runtime.records.registry import Record

__all__ = ["NEEDS_APPROVAL", "Answer", "Speech", "choose_by_model", "refused", "speak", "view_for"]

NEEDS_APPROVAL = (
    "this call was not run: tool {tool!r} needs a person's approval, and a conversation's turn "
    "cannot wait for one (give the agent a task to use it)"
)

USER = "user"


@dataclass(frozen=True, slots=True)
class Answer:
    text: str
    call: ModelCall | None


class _Quiet:
    """A selector's turn's hooks (no tools): nothing is committed during the turn (its caller
    records the calls)."""

    def __init__(self, turn: str) -> None:
        self.turn = turn

    async def before_call(self, state: TurnState) -> str | None:
        return self.turn

    async def answered(self, state: TurnState, answer: AssistantMessage) -> bool:
        return True

    async def starting(self, state: TurnState, step: RunTool) -> None:
        return None

    async def ran(self, state: TurnState, result: ToolResult) -> ToolResult:
        return result


@dataclass
class Speech:
    """A speaker's turn's hooks: each answer asking for tools and each tool result is handed
    to ``record`` as it comes (what the turn records before its answer); ``recorded`` are the
    model calls so recorded (the caller accounts the others if the turn writes nothing)."""

    turn: str
    session: str
    record: Callable[[Sequence[Record]], Awaitable[None]]
    recorded: list[ModelCall] = field(default_factory=list)

    async def before_call(self, state: TurnState) -> str | None:
        return self.turn

    async def answered(self, state: TurnState, answer: AssistantMessage) -> bool:
        if answer.tool_calls:
            await self.record((answer,))
            if answer.call is not None:
                self.recorded.append(answer.call)
        return True

    async def starting(self, state: TurnState, step: RunTool) -> None:
        return None  # no call is approved in a conversation: none waits for a person

    async def ran(self, state: TurnState, result: ToolResult) -> ToolResult:
        await self.record((result,))
        return result

    def unrecorded(self, calls: Sequence[ModelCall]) -> tuple[ModelCall, ...]:
        """Of ``calls`` (a ledger's), those not recorded with an answer."""
        return tuple(c for c in calls if not any(c is r for r in self.recorded))


def refused(call: ToolCall, agent: str, turn: str) -> ToolResult:
    """What a call whose tool needs a person's approval is answered with."""
    return ToolResult(call.id, call.name, NEEDS_APPROVAL.format(tool=call.name), True, agent, turn)


def view_for(speaker: str, transcript: Sequence[Spoken], turn: str) -> list[Message]:
    """The conversation as ``speaker`` is shown it, ending with a user message."""
    parts: list[tuple[str, str]] = []
    for said in transcript:
        role = "assistant" if said.speaker == speaker else "user"
        text = said.text if role == "assistant" else f"[{said.speaker}] {said.text}"
        if parts and parts[-1][0] == role:
            parts[-1] = (role, f"{parts[-1][1]}\n\n{text}")
        else:
            parts.append((role, text))
    cue = f"It is your turn to speak, {speaker}."
    if parts and parts[-1][0] == "user":
        parts[-1] = ("user", f"{parts[-1][1]}\n\n{cue}")
    else:
        parts.append(("user", cue))
    return [
        UserMessage(text, speaker, turn)
        if role == "user"
        else AssistantMessage(text, (), speaker, turn)
        for role, text in parts
    ]


def _framing(conversation: Conversation, speaker: str) -> str:
    others = ", ".join(s for s in conversation.speaker_names if s != speaker)
    lines = [
        f"You are {speaker}, one speaker in the conversation {conversation.name!r} with {others}.",
        "Messages from the others start with their name in brackets. Answer as yourself, "
        "briefly, without a name prefix.",
    ]
    if conversation.instructions:
        lines.append(conversation.instructions)
    return "\n".join(lines)


async def _one_call(
    context: Context, plan: TurnPlan, model: str, messages: list[Message], turn: str, ledger: Ledger
) -> Answer:
    state = TurnState(plan, tuple(messages[:-1]), [messages[-1]])
    end = await drive(
        state,
        executor=context.executor,
        provider=provider_for(context.providers, plan.agent, model),
        driver=_Quiet(turn),
        ledger=ledger,
        retry=context.turn_retry,
    )
    if not isinstance(end, Finish):
        raise TurnFailed(f"agent {plan.agent!r} did not answer in words ({type(end).__name__})")
    return Answer(end.answer.content or "", end.answer.call)


async def speak(
    context: Context,
    conversation: Conversation,
    agent: AutonomousAgent,
    transcript: Sequence[Spoken],
    ledger: Ledger,
    speech: Speech,
    *,
    tools: tuple[RunnableTool, ...] = (),
    resumed: Sequence[Message] = (),
) -> Answer:
    """``agent``'s turn: what it said (maybe nothing). ``resumed``: what a turn cut off had
    recorded (its answers asking for tools and their results), gone on from."""
    instructions = "\n\n".join(
        p for p in (agent.instructions, _framing(conversation, agent.name)) if p
    )
    plan = TurnPlan(
        agent=agent.name,
        instructions=instructions,
        tools=tools,
        reasoning_effort=agent.reasoning_effort,
        max_rounds=conversation.max_tool_rounds,
    )
    messages = view_for(agent.name, transcript, speech.turn)
    state = TurnState(plan, tuple(messages[:-1]), [messages[-1], *resumed])
    provider = provider_for(context.providers, plan.agent, agent.model)
    while True:
        end = await drive(
            state,
            executor=context.executor,
            provider=provider,
            driver=speech,
            ledger=ledger,
            retry=context.turn_retry,
            session=speech.session,
        )
        if isinstance(end, AwaitDecision):  # refused, recorded, and the turn goes on
            for call in end.waiting:
                state.add(await speech.ran(state, refused(call, agent.name, speech.turn)))
            continue
        if isinstance(end, OutOfRounds):
            raise TurnFailed(
                f"{agent.name} still asked for tools after {end.rounds} tool rounds (the "
                f"conversation's max_tool_rounds)"
            )
        if not isinstance(end, Finish):
            raise TurnFailed(f"agent {agent.name!r} did not answer in words ({type(end).__name__})")
        return Answer(end.answer.content or "", end.answer.call)


END = "END"


async def choose_by_model(
    context: Context,
    conversation: Conversation,
    selector: Selector,
    transcript: Sequence[Spoken],
    turn: str,
    ledger: Ledger,
) -> str | None:
    """The name a selector's model answers (as it answered it, trimmed), or None for END."""
    names = ", ".join(conversation.speaker_names)
    instructions = "\n".join(
        p
        for p in (
            f"You moderate the conversation {conversation.name!r} among {names}.",
            "Read it and answer with the name of who should speak next, and nothing else; "
            f"answer {END} when the conversation has reached its end.",
            selector.instructions,
        )
        if p
    )
    lines = [f"[{s.speaker}] {s.text}" for s in transcript]
    asked = UserMessage("\n\n".join([*lines, f"Who speaks next ({names}, or {END})?"]), "", turn)
    plan = TurnPlan(agent=f"{conversation.name}.moderator", instructions=instructions, max_rounds=0)
    answer = await _one_call(context, plan, selector.model, [asked], turn, ledger)
    name = answer.text.strip().strip(".").strip()
    return None if name.upper() == END else name
