"""One speaker's turn, and a selector's choice, in a moderated conversation: engine turns.

A speaker is shown the conversation from where it sits: its own earlier turns as its answers,
everyone else's as user messages naming who spoke (consecutive ones joined, so roles still
alternate), ending with the cue that it is its turn. The turn is one engine turn
(:func:`ankka.runtime.engine.loop.drive`) with the speaker's instructions and model and no
tools: the same executor, retry policy and accounting as every other turn. Pure but for the
model call; the caller bounds it by its deadline and records what it returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ankka._kernel.errors import TurnFailed
from ankka.runtime.declare.autonomous import AutonomousAgent
from ankka.runtime.declare.teams import Conversation, Selector, Spoken
from ankka.runtime.drivers.context import Context
from ankka.runtime.engine.executor import Ledger
from ankka.runtime.engine.loop import drive
from ankka.runtime.engine.planning import provider_for
from ankka.runtime.engine.steps import Finish, RunTool, TurnPlan, TurnState
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    ModelCall,
    ToolResult,
    UserMessage,
)

__all__ = ["Answer", "choose_by_model", "speak", "view_for"]

USER = "user"


@dataclass(frozen=True, slots=True)
class Answer:
    text: str
    call: ModelCall | None


class _Quiet:
    """A conversation turn's hooks: nothing is committed during the turn (its caller records
    the answer)."""

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
    turn: str,
    ledger: Ledger,
) -> Answer:
    """``agent``'s turn: what it said (maybe nothing)."""
    instructions = "\n\n".join(
        p for p in (agent.instructions, _framing(conversation, agent.name)) if p
    )
    plan = TurnPlan(agent=agent.name, instructions=instructions, max_rounds=0)
    return await _one_call(
        context, plan, agent.model, view_for(agent.name, transcript, turn), turn, ledger
    )


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
