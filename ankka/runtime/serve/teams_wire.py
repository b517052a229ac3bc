"""The team and conversation routes' wire: their bodies and answers (docs/http-api.md)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from ankka.runtime.declare.teams import EndReason
from ankka.runtime.records.tasks import MAX_DEPENDENCIES, MAX_ID, MAX_INSTRUCTIONS
from ankka.runtime.serve.wire import Body, Wire
from ankka.runtime.store.team_message_statements import EVERYONE, MAX_TEXT, Kind
from ankka.runtime.store.team_statements import MAX_PRIORITY

__all__ = [
    "ConversationBody",
    "ConversationRun",
    "Item",
    "ItemBody",
    "ItemListing",
    "Message",
    "MessageBody",
    "MessagePage",
    "PriorityBody",
    "TeamSummary",
]

ItemState = Literal["waiting", "ready", "claimed", "completed", "failed", "cancelled"]


class ItemBody(Body):
    shape: ClassVar[str] = '{"type", "instructions", "depends_on"?, "assignee"?, "priority"?}'
    type: str = Field(min_length=1, max_length=MAX_ID)
    instructions: str = Field(min_length=1, max_length=MAX_INSTRUCTIONS)
    depends_on: list[str] = Field(default_factory=list, max_length=MAX_DEPENDENCIES)
    assignee: str | SkipJsonSchema[None] = Field(
        default=None, max_length=MAX_ID, description="the member agent that must work it"
    )
    priority: int = Field(
        default=0,
        ge=-MAX_PRIORITY,
        le=MAX_PRIORITY,
        description="members claim the highest-priority ready item first, ties in the order added",
    )


class PriorityBody(Body):
    shape: ClassVar[str] = '{"priority": N}'
    priority: int = Field(ge=-MAX_PRIORITY, le=MAX_PRIORITY)


class ClaimedBy(Wire):
    agent: str = Field(description="the member agent")
    instance: str = Field(description="its member instance")


class Item(Wire):
    """A backlog item: ``claimed_by`` names who works it (or worked it, once final)."""

    id: str
    type: str
    state: ItemState
    claimed_by: ClaimedBy | None
    result: Any = Field(description="the task's typed result, once completed")
    reason: str | None = Field(description="why it failed or was cancelled")
    team: str
    task: str = Field(description="the task that works it: GET /v1/tasks/{task}")
    instructions: str
    depends_on: list[str]
    assignee: str | None
    priority: int = Field(description="its priority now (higher: claimed first)")
    claims: int = Field(description="how many times it was claimed (more: a claim ran out)")
    claimed_at: str | None
    created_by: str
    created_at: str
    updated_at: str


class ItemListing(Wire):
    team: str
    items: list[Item]
    counts: dict[str, int] = Field(description="items by state")


class Allowance(Wire):
    """One of the backlog's budgets: its limit (null: none), what its tasks spent, and what
    is granted to tasks at work and not spent yet (claimed first, given back when they end)."""

    limit: int | None
    used: int
    reserved: int


class Budget(Wire):
    iterations: Allowance
    tokens: Allowance = Field(description="input and output tokens")


class OldestClaim(Wire):
    item: str
    claimed_at: str
    age_seconds: float = Field(description="how long ago it was claimed")


class TeamSummary(Wire):
    """A backlog by aggregate: what to poll (its items stay in ``GET .../items``)."""

    team: str
    items: int = Field(description="items the caller may read")
    counts: dict[ItemState, int] = Field(description="those items by state, every state")
    budget: Budget = Field(description="the whole backlog's: one budget covers every item")
    oldest_claim: OldestClaim | None = Field(description="the claim held longest, if any")
    last_event: int = Field(
        description="the id of the team's last event when read: GET .../events with "
        "Last-Event-ID: it streams what happens after"
    )
    at: str = Field(description="when it was read")


class MessageBody(Body):
    shape: ClassVar[str] = '{"to", "kind", "text", "id"?}'
    to: str = Field(
        min_length=1,
        max_length=MAX_ID,
        description=f"an agent of the team (its lead or a member), or {EVERYONE!r}",
    )
    kind: Kind = Field(description="note, question, answer or blocker")
    text: str = Field(min_length=1, max_length=MAX_TEXT, description="the message, short")
    id: str | SkipJsonSchema[None] = Field(
        default=None,
        min_length=1,
        max_length=MAX_ID,
        description="the message's id (the same message again: 200, nothing sent twice); "
        "left out, the runtime gives one",
    )


class Message(Wire):
    """A message on a team's channel."""

    id: str
    team: str
    sender: str = Field(description="the agent that sent it, or the caller (sender_task null)")
    sender_task: str | None = Field(description="the task whose tool call sent it")
    to: str = Field(description=f"the agent it was sent to, or {EVERYONE!r}")
    kind: Kind
    text: str
    created_by: str = Field(description="whom it was sent for: the caller, or the task's creator")
    created_at: str


class MessagePage(Wire):
    """A page of a team's messages the caller may read, in the order sent; ``next`` is the
    cursor of the page after (``?cursor=``), null on the last page."""

    team: str
    messages: list[Message]
    next: str | None


class ConversationBody(Body):
    shape: ClassVar[str] = '{"message": "..."}'
    message: str = Field(min_length=1, max_length=MAX_INSTRUCTIONS)


class Turn(Wire):
    speaker: str
    text: str


class Skipped(Wire):
    speaker: str
    reason: str
    detail: str


class Ended(Wire):
    reason: EndReason
    detail: str = Field(description="what ended it, in words")


class ConversationRun(Wire):
    conversation: str
    session: str
    turns: list[Turn] = Field(description="this message's turns, in order")
    skipped: list[Skipped] = Field(description="turns that produced nothing, and why")
    ended: Ended
    usage: dict[str, int]
