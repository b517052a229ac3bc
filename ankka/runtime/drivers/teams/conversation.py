"""A moderated conversation, run to its end (docs/teams.md, "Moderated conversations").

``POST /v1/conversations/{conversation}/sessions/{session}`` with a message: under the
session's turn lock, the message is recorded, then the moderator chooses a speaker, the
speaker takes its turn (:mod:`.speaking`), the turn is recorded, and so on until the
moderator ends it, the turns run out (``max_turns``), its tokens are spent, or its deadline
passes. A speaker that says nothing (or not within its turn's deadline) is silent; one whose
turn fails has failed; a name the moderator gives that is not a speaker is unknown: each is
skipped or ends the conversation by the conversation's policy, and is recorded with why.
Every turn is bounded by what is left of the deadline, so the run never hangs. The session
is the journal's ``conversation:<name>:<session>``; a later message goes on from its
transcript. A speaker uses its agent's tools (:mod:`.speaking`); what its turn asks of them is
recorded as it comes, so a run cut off (its process stopped, its stream's caller left) goes
on from its records when the same message is sent again (:mod:`.runs`): no recorded call of
a speaker's is made again (a model moderator's choice is not recorded: it is asked again), and
a run cut off after a skip that ended it ends so. A different message ends the run cut off
first (``interrupted``), its detail saying why it was cut off when that was recorded as it
happened: whoever cancels the run and knows why (the stream, when its caller left or its own
deadline passed; the server's drain, which marks the request it cuts) says so in the run's
:class:`CutCause`, and the run records it as it stops (``conversation_cut_off``); a killed
process records nothing, so "the runtime stopped" stays the default. ``heard`` hears each
turn as it is recorded (the streamed answer, docs/http-api.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ankka._kernel.errors import AnkkaError, NotFound
from ankka._kernel.ids import new_id
from ankka.runtime.declare.teams import (
    Conversation,
    EndReason,
    Moderated,
    Selector,
    Spoken,
)
from ankka.runtime.drivers.context import Context
from ankka.runtime.drivers.teams.runs import RecordedRun, recorded_run, spoken
from ankka.runtime.drivers.teams.speaking import USER, Answer, Speech, choose_by_model, speak
from ankka.runtime.engine.executor import Ledger
from ankka.runtime.engine.session import SessionState
from ankka.runtime.records.accounting import UnwrittenCalls
from ankka.runtime.records.conversations import (
    CUT_BY,
    SHUTTING_DOWN,
    ConversationCutOff,
    ConversationEnded,
    ConversationResumed,
    TurnSkipped,
)
from ankka.runtime.records.messages import AssistantMessage, Message, Usage, UserMessage
from ankka.runtime.records.registry import Record
from ankka.runtime.records.session import SessionOpened
from ankka.runtime.records.tasks import CONVERSATION_SESSION_PREFIX, check_id

__all__ = [
    "CONVERSATION_PREFIX",
    "Conversations",
    "CutCause",
    "Heard",
    "Outcome",
    "Started",
    "interrupted",
    "session_of",
]

CONVERSATION_PREFIX = CONVERSATION_SESSION_PREFIX
T = TypeVar("T")
STOPPED = "the runtime stopped"  # why a run was cut off, when nothing recorded why


def interrupted(cause: str | None) -> str:
    """The ``interrupted`` end's detail, for a run cut off by ``cause`` (None: not recorded)."""
    why = CUT_BY.get(cause, STOPPED) if cause is not None else STOPPED
    return f"{why} during this run, and a different message followed"


def _no_shutdown() -> bool:
    return False


@dataclass(slots=True)
class CutCause:
    """Why a run's task is cancelled, when it is known as it stops (:meth:`known`, recorded):
    ``cause``, set by its canceller before it cancels
    (:data:`~ankka.runtime.records.conversations.CALLER_LEFT`,
    :data:`~ankka.runtime.records.conversations.STREAM_DEADLINE_EXCEEDED`), or
    :data:`~ankka.runtime.records.conversations.SHUTTING_DOWN` when ``shutdown()``, asked then,
    says the server's drain cut the request (:func:`~ankka._kernel.drain.cut_by_shutdown`:
    the drain marks it before it cancels; the request's handler, cancelled with the run, could
    not say so itself)."""

    cause: str | None = None
    shutdown: Callable[[], bool] = _no_shutdown

    def known(self) -> str | None:
        return SHUTTING_DOWN if self.shutdown() else self.cause


@dataclass(frozen=True, slots=True)
class Started:
    """The run has begun (its caller was let in, its message recorded, or it is resumed)."""

    turn: str
    resumed: bool


Heard = Callable[[Started | Spoken | TurnSkipped], None]


def session_of(conversation: str, session: str) -> str:
    return f"{CONVERSATION_PREFIX}{conversation}:{session}"


@dataclass(frozen=True, slots=True)
class Outcome:
    turns: tuple[Spoken, ...]
    skipped: tuple[TurnSkipped, ...]
    reason: EndReason
    detail: str
    usage: Usage


@dataclass
class _Run:
    conversation: Conversation
    session: str
    turn: str
    deadline: float
    transcript: list[Spoken]
    said: list[Spoken] = field(default_factory=list)
    skipped: list[TurnSkipped] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    last: str | None = None
    heard: Heard | None = None
    pending: tuple[Message, ...] = ()
    pending_speaker: str | None = None
    closing: TurnSkipped | None = None  # a recorded skip that ended the run (cut off after)

    def tell(self, what: Started | Spoken | TurnSkipped) -> None:
        if self.heard is not None:
            self.heard(what)


class Conversations:
    """The service's moderated conversations, on a context's journal."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.declared = context.service.conversations

    def conversation(self, name: str) -> Conversation:
        found = self.declared.get(name)
        if found is None:
            known = ", ".join(sorted(self.declared)) or "none"
            raise NotFound(f"there is no conversation {name!r} (conversations: {known})")
        return found

    async def run(
        self,
        name: str,
        session: str,
        message: str,
        *,
        caller: str,
        heard: Heard | None = None,
        cut_cause: CutCause | None = None,
    ) -> Outcome:
        conversation = self.conversation(name)
        check_id(session, "session")
        ctx = self.context
        journal_session = session_of(name, session)
        async with ctx.queue.turn(journal_session):
            folded = await ctx.sessions.load(journal_session)
            ctx.check(journal_session, caller, "write", folded.opened)
            transcript = [
                Spoken(m.agent if isinstance(m, AssistantMessage) else USER, m.content or "")
                for m in folded.view.messages
                if isinstance(m, UserMessage | AssistantMessage) and spoken(m)
            ]
            cut = await self._cut_off(journal_session, folded, conversation)
            if cut is not None and cut[0].content == message:
                run = self._resumed(conversation, journal_session, cut, transcript)
                if cut[1].cut_by is not None:  # a later cut nobody records is not told as that
                    await self._record(journal_session, (ConversationResumed(run.turn),))
            else:
                if cut is not None:
                    detail = interrupted(cut[1].cut_by)
                    ended = ConversationEnded(cut[0].turn, EndReason.INTERRUPTED.value, detail)
                    await self._record(journal_session, (ended,))
                opening = (SessionOpened(caller, name),) if folded.position == 0 else ()
                turn = new_id("conv")
                await self._record(journal_session, (*opening, UserMessage(message, name, turn)))
                transcript.append(Spoken(USER, message))
                deadline = ctx.clock.monotonic() + conversation.deadline
                run = _Run(conversation, journal_session, turn, deadline, transcript)
            run.heard = heard
            run.tell(Started(run.turn, resumed=bool(run.said or run.skipped or run.pending)))
            try:
                reason, detail = await self._turns(run)
            except asyncio.CancelledError:
                why = cut_cause.known() if cut_cause is not None else None
                if why is not None:
                    await self._record(journal_session, (ConversationCutOff(run.turn, why),))
                raise
            await self._record(
                journal_session, (ConversationEnded(run.turn, reason.value, detail),)
            )
        return Outcome(tuple(run.said), tuple(run.skipped), reason, detail, run.usage)

    async def _cut_off(
        self, session: str, folded: SessionState, conversation: Conversation
    ) -> tuple[UserMessage, RecordedRun] | None:
        """The session's last run, when it has no end (cut off): its message and records."""
        view = folded.view
        for message, seq in zip(reversed(view.verbatim), reversed(view.seqs), strict=True):
            if isinstance(message, UserMessage):
                entries = await self.context.journal.read(session, after=seq)
                recorded = recorded_run(entries, message.turn, conversation.speaker_names)
                return None if recorded.ended else (message, recorded)
        return None

    def _resumed(
        self,
        conversation: Conversation,
        session: str,
        cut: tuple[UserMessage, RecordedRun],
        transcript: list[Spoken],
    ) -> _Run:
        """The run cut off, to go on with: its deadline is the conversation's again, from now
        (the clock of the process that began it is gone)."""
        message, recorded = cut
        deadline = self.context.clock.monotonic() + conversation.deadline
        run = _Run(conversation, session, message.turn, deadline, transcript)
        run.said, run.skipped = list(recorded.said), list(recorded.skipped)
        run.usage, run.last = recorded.usage, recorded.last
        if recorded.pending_speaker in conversation.speaker_names:  # (still one of them)
            run.pending, run.pending_speaker = recorded.pending, recorded.pending_speaker
        closing = recorded.closing
        if closing is not None and _policy(conversation, closing.reason) == "end":
            run.closing = closing  # cut off between the skip and the end it made
        return run

    async def _record(self, session: str, records: tuple[Record, ...]) -> None:
        folded = await self.context.sessions.load(session)
        await self.context.record(session, folded, records)

    async def _turns(self, run: _Run) -> tuple[EndReason, str]:
        conversation = run.conversation
        if run.closing is not None:  # it ended by that skip: its end is recorded now
            return EndReason(run.closing.reason), run.closing.detail
        for number in range(len(run.said) + len(run.skipped), conversation.max_turns):
            left = run.deadline - self.context.clock.monotonic()
            if left <= 0:
                return (
                    EndReason.DEADLINE_EXCEEDED,
                    f"its deadline of {conversation.deadline:g} s passed",
                )
            if conversation.tokens is not None and _total(run.usage) >= conversation.tokens:
                return (
                    EndReason.BUDGET_EXHAUSTED,
                    f"{_total(run.usage)} tokens spent of its {conversation.tokens}",
                )
            if run.pending_speaker is not None:  # the turn cut off goes on first
                speaker, run.pending_speaker = run.pending_speaker, None
                ended = await self._speak(run, speaker)
            else:
                ended = await self._turn(run, number)
            if ended is not None:
                return ended
        return EndReason.MAX_TURNS, f"{conversation.max_turns} turns, its max_turns"

    async def _turn(self, run: _Run, number: int) -> tuple[EndReason, str] | None:
        conversation = run.conversation
        try:
            chosen = await self._bounded(run, self._choose(run, number))
        except TimeoutError:
            return self._late(run) or (
                EndReason.DEADLINE_EXCEEDED,
                "the moderator did not choose in time",
            )
        except Exception as exc:  # a moderator function is the service's code
            return EndReason.MODERATOR, f"the moderator failed: {type(exc).__name__}: {exc}"
        if chosen is None:
            return EndReason.MODERATOR, "the moderator ended it"
        if chosen not in conversation.speaker_names:
            detail = (
                f"the moderator named {chosen[:64]!r}, not a speaker of {conversation.name!r} "
                f"({', '.join(conversation.speaker_names)})"
            )
            return await self._skip(
                run, chosen[:64], EndReason.UNKNOWN_SPEAKER, detail, conversation.on_unknown
            )
        return await self._speak(run, chosen)

    async def _speak(self, run: _Run, speaker: str) -> tuple[EndReason, str] | None:
        conversation = run.conversation
        agent = self.context.service.autonomous_agents[speaker]
        ledger = self.context.executor.ledger()
        resumed, run.pending = run.pending, ()
        listing: list[Record] = []

        async def record(records: Sequence[Record]) -> None:
            await self._record(run.session, (*listing, *records))
            listing.clear()  # the tools' listing goes with the turn's first records

        speech = Speech(run.turn, run.session, record)

        async def take() -> Answer:
            listed = await self.context.mcp_tools(
                agent.servers,
                agent=speaker,
                turn=run.turn,
                folded=await self.context.sessions.load(run.session),
                effect=agent,
            )
            listing.extend(listed.records)
            tools = (*agent.tools, *listed.tools)
            return await speak(
                self.context, conversation, agent, run.transcript, ledger, speech,
                tools=tools, resumed=resumed,
            )  # fmt: skip

        try:
            answer = await self._bounded(run, take(), turn_deadline=True)
        except TimeoutError:
            spent = self._spent(run, ledger, speech, speaker, "speaker_silent")
            late = self._late(run)
            if late is not None:
                if spent:
                    await self._record(run.session, spent)
                return late
            detail = f"{speaker} said nothing within {conversation.turn_deadline:g} s"
            return await self._skip(
                run, speaker, EndReason.SPEAKER_SILENT, detail, conversation.on_silent, spent
            )
        except AnkkaError as exc:
            spent = self._spent(run, ledger, speech, speaker, "speaker_failed")
            detail = f"{speaker}'s turn failed: {exc}"
            return await self._skip(
                run, speaker, EndReason.SPEAKER_FAILED, detail, conversation.on_failure, spent
            )
        run.usage = run.usage + ledger.usage
        run.last = speaker
        if not answer.text.strip():
            spent = self._spent(run, ledger, speech, speaker, "speaker_silent", add=False)
            detail = f"{speaker} answered with nothing"
            return await self._skip(
                run, speaker, EndReason.SPEAKER_SILENT, detail, conversation.on_silent, spent
            )
        said = AssistantMessage(
            answer.text, (), speaker, run.turn, answer.call, turn_usage=ledger.usage
        )
        await record((said,))
        turn = Spoken(speaker, answer.text)
        run.transcript.append(turn)
        run.said.append(turn)
        run.tell(turn)
        return None

    def _spent(
        self, run: _Run, ledger: Ledger, speech: Speech, agent: str, reason: str, *,
        add: bool = True,
    ) -> tuple[Record, ...]:  # fmt: skip
        """The accounting of the calls of a turn that wrote no answer (those not recorded
        with its answers asking for tools), to record with its skip."""
        if add:
            run.usage = run.usage + ledger.usage
        calls = speech.unrecorded(ledger.calls)
        return (UnwrittenCalls(run.turn, agent, reason, calls),) if calls else ()

    async def _skip(
        self, run: _Run, speaker: str, reason: EndReason, detail: str, policy: str,
        spent: tuple[Record, ...] = (),
    ) -> tuple[EndReason, str] | None:  # fmt: skip
        """Record the skip, in one append with what the turn ``spent``: cut off between two,
        the run gone on with would ask the speaker again, its recorded call made again."""
        skipped = TurnSkipped(run.turn, speaker, reason.value, detail)
        await self._record(run.session, (*spent, skipped))
        run.skipped.append(skipped)
        run.tell(skipped)
        run.last = speaker if speaker in run.conversation.speaker_names else run.last
        return (reason, detail) if policy == "end" else None

    def _late(self, run: _Run) -> tuple[EndReason, str] | None:
        if run.deadline - self.context.clock.monotonic() <= 0:
            return (
                EndReason.DEADLINE_EXCEEDED,
                f"its deadline of {run.conversation.deadline:g} s passed",
            )
        return None

    async def _bounded(
        self, run: _Run, work: Coroutine[Any, Any, T], *, turn_deadline: bool = False
    ) -> T:
        left = run.deadline - self.context.clock.monotonic()
        if turn_deadline:
            left = min(left, run.conversation.turn_deadline)
        async with asyncio.timeout(max(left, 0.0)):
            return await work

    async def _choose(self, run: _Run, number: int) -> str | None:
        conversation = run.conversation
        moderator = conversation.moderator
        names = conversation.speaker_names
        if isinstance(moderator, Moderated):
            return moderator.choose(tuple(run.transcript), names)
        if isinstance(moderator, Selector):
            ledger = self.context.executor.ledger()
            try:
                return await choose_by_model(
                    self.context, conversation, moderator, run.transcript, run.turn, ledger
                )
            finally:
                run.usage = run.usage + ledger.usage
                if ledger.calls:
                    calls = UnwrittenCalls(
                        run.turn, f"{conversation.name}.moderator", "moderator", tuple(ledger.calls)
                    )
                    await self._record(run.session, (calls,))
        following = names.index(run.last) + 1 if run.last in names else 0
        return names[following % len(names)]


def _policy(conversation: Conversation, reason: str) -> str | None:
    """The policy a skip for ``reason`` was taken by (skip or end)."""
    policies = {
        EndReason.SPEAKER_SILENT.value: conversation.on_silent,
        EndReason.SPEAKER_FAILED.value: conversation.on_failure,
        EndReason.UNKNOWN_SPEAKER.value: conversation.on_unknown,
    }
    return policies.get(reason)


def _total(usage: Usage) -> int:
    return usage.input_tokens + usage.output_tokens
