"""The runtime API's wire: every request body and every answer, as pydantic models.

FastAPI reads each body into its model here, and every answer passes through its model on the
way out (a route returns the fields it has; the model checks them, an answer that does not fit
is a 500 the tests see, and only the fields the route set are sent). ``/openapi.json`` is
built from the same models, so the document cannot say one thing while the server sends
another. The fields follow what the records render (``as_dict`` in :mod:`ankka.runtime.records`);
a field marked :data:`Absent` is left out of an answer that has nothing for it (never sent as
``null``).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from ankka.runtime.declare.autonomous import MAX_BUDGET, MAX_TOKENS
from ankka.runtime.records.delegation import MAX_CHAIN
from ankka.runtime.records.tasks import (
    MAX_ATTACHMENT,
    MAX_ATTACHMENTS,
    MAX_DEPENDENCIES,
    MAX_ID,
    MAX_INSTRUCTIONS,
    InstanceState,
    TaskState,
)

__all__ = [
    "MAX_JUDGMENT_TEXT",
    "Agents",
    "Approval",
    "ApprovalListing",
    "Awaiting",
    "Calls",
    "Conversation",
    "DecisionAnswer",
    "DecisionBody",
    "Error",
    "Health",
    "Instance",
    "JudgmentAnswer",
    "JudgmentBody",
    "NotReady",
    "Ready",
    "SessionSummary",
    "Task",
    "TaskBody",
    "TurnAnswer",
    "TurnBody",
]

MAX_JUDGMENT_TEXT = 32_000
MAX_NAME = 320  # a Kubernetes namespace (63) / a name (253)
# ISO 8601 with its offset, as the records write it (``datetime.isoformat``).
Time = Annotated[str, Field(json_schema_extra={"format": "date-time"})]
Cost = Literal["unknown"]  # tokens are counted; money is not (there is no price table)


class Wire(BaseModel):
    """A JSON object of the API: exactly these fields (a stray one is an error, both ways)."""

    model_config = ConfigDict(extra="forbid")


class Body(Wire):
    """A request body; ``shape`` is how an error describes the body expected."""

    shape: ClassVar[str] = "a JSON object"


# --- request bodies ---------------------------------------------------------------------


class TurnBody(Body):
    shape: ClassVar[str] = '{"message": "..."}'
    message: str = Field(min_length=1)


class JudgmentBody(Body):
    shape: ClassVar[str] = '{"text": "..."}'
    text: str = Field(min_length=1, max_length=MAX_JUDGMENT_TEXT)


class AttachmentBody(Wire):
    """Inline ``text`` or a ``ref`` a tool can fetch: exactly one of the two."""

    name: str = Field(default="", max_length=MAX_ID)
    text: Annotated[str, Field(max_length=MAX_ATTACHMENT)] | SkipJsonSchema[None] = None
    ref: Annotated[str, Field(max_length=2048)] | SkipJsonSchema[None] = None


class BudgetBody(Wire):
    iterations: Annotated[int, Field(ge=1, le=MAX_BUDGET)] | SkipJsonSchema[None] = None
    tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS)] | SkipJsonSchema[None] = None


class TaskBody(Body):
    shape: ClassVar[str] = (
        '{"type", "instructions", "attachments"?, "depends_on"?, "instance"?, "name"?, "budget"?, '
        '"parent"?, "lineage"?}'
    )
    type: str = Field(min_length=1, max_length=MAX_ID)
    instructions: str = Field(min_length=1, max_length=MAX_INSTRUCTIONS)
    attachments: list[AttachmentBody | Annotated[str, Field(max_length=MAX_ATTACHMENT)]] = Field(
        default_factory=list, max_length=MAX_ATTACHMENTS
    )
    depends_on: list[str] = Field(default_factory=list, max_length=MAX_DEPENDENCIES)
    instance: Annotated[str, Field(max_length=MAX_ID)] | SkipJsonSchema[None] = None
    budget: BudgetBody | SkipJsonSchema[None] = Field(
        default=None, description="this task's own budget, within its type's"
    )
    name: Annotated[str, Field(min_length=1, max_length=MAX_NAME)] | SkipJsonSchema[None] = Field(
        default=None,
        description="a name for people (the operator sends the Task's <namespace>/<name>); "
        "the console shows it",
    )
    parent: Annotated[str, Field(min_length=1, max_length=MAX_ID)] | SkipJsonSchema[None] = Field(
        default=None,
        description="another runtime's task this one is a child of (delegation across "
        "runtimes: only from a caller ANKKA_DELEGATORS names)",
    )
    lineage: list[Annotated[str, Field(min_length=1, max_length=MAX_ID)]] = Field(
        default_factory=list,
        max_length=MAX_CHAIN,
        description="with parent: the chain of agents from the root to the parent",
    )


class DecisionBody(Body):
    shape: ClassVar[str] = (
        '{"decision": "approve"|"refuse", "digest": "...", "reason"?: "...", "content"?: {...}}'
    )
    decision: Literal["approve", "refuse"]
    digest: str = Field(min_length=64, max_length=64)
    reason: str = Field(default="", max_length=2000)
    content: dict[str, Any] | None = Field(
        default=None,
        max_length=100,
        description="a server's question (id eli_...) approved: the form's values, checked "
        "against its schema (fields left out take the schema's defaults)",
    )


# --- answers ------------------------------------------------------------------------------


class ErrorDetail(Wire):
    type: str = Field(description="what kind of error (docs/http-api.md, Errors)")
    message: str = Field(description="what was wrong, in words a person can act on")


class Error(Wire):
    """Every error the API answers."""

    error: ErrorDetail


class Usage(Wire):
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


class ModelCall(Wire):
    provider: str
    model: str
    agent: str
    latency_ms: float
    usage: Usage


class TurnAnswer(Wire):
    """A turn's reply: the text, or the typed answer as JSON."""

    reply: str | dict[str, Any]
    usage: Usage
    cost: Cost
    turn: str
    model_calls: list[ModelCall]


class Approval(Wire):
    """A tool call that waits for a person; ``digest`` binds a decision to these arguments."""

    id: str
    tool: str
    arguments: Any = Field(description="the call's arguments, decoded when they are JSON")
    digest: str
    expires_at: Time | None


class Awaiting(Wire):
    """A turn suspended until a person decides its tool calls (202)."""

    status: Literal["awaiting_approval"]
    approvals: list[Approval]


class QuestionAnswer(Wire):
    probabilities: dict[str, float]
    coverage: float
    measured: Literal["before_constraint", "after_constraint"]


class JudgmentAnswer(Wire):
    answers: dict[str, QuestionAnswer]
    usage: Usage


class ToolCall(Wire):
    id: str
    name: str
    arguments: str = Field(description="the JSON text exactly as the model wrote it")


class UserMessage(Wire):
    role: Literal["user"]
    content: str
    agent: str
    turn: str


class AssistantMessage(Wire):
    role: Literal["assistant"]
    content: str | None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    model_call: ModelCall | SkipJsonSchema[None] = None
    usage: Usage | SkipJsonSchema[None] = Field(
        default=None, description="on the last answer of a turn: every call of the turn"
    )
    agent: str
    turn: str


class ToolResult(Wire):
    role: Literal["tool"]
    tool_call_id: str
    name: str
    content: str
    is_error: bool
    agent: str
    turn: str


class SummaryMessage(Wire):
    role: Literal["summary"]
    content: str
    replaces: int
    agent: str
    turn: str


Message = Annotated[
    UserMessage | AssistantMessage | ToolResult | SummaryMessage, Field(discriminator="role")
]


class Conversation(Wire):
    session: str
    as_sent: bool
    messages: list[Message]


class SessionSummary(Wire):
    session: str
    messages: int
    turns: int
    pending: int
    usage: Usage
    unwritten_turns: int
    unwritten_usage: Usage
    total_usage: Usage
    judgment_usage: Usage
    cost: Cost
    compactions: int
    compaction_rejections: int
    compaction_usage: Usage
    awaiting_approval: list[Approval]
    agents: list[str] = Field(description="the agents that took its turns")
    created_at: Time | None = Field(description="its first record's time")
    updated_at: Time | None = Field(description="its last record's time: its last activity")


class SessionCall(ModelCall):
    turn: str
    written: bool
    reason: str | None = Field(description="why its turn wrote nothing, when it did not")
    sampling: str | None = Field(
        default=None,
        description="the MCP server whose sampling request the call answered (its tokens are "
        "its turn's)",
    )


class Calls(Wire):
    session: str
    calls: list[SessionCall]


class Accepts(Wire):
    type: str
    budget: int


class AgentInfo(Wire):
    name: str
    description: str
    kind: Literal["request", "autonomous"]
    accepts: list[Accepts] = Field(
        default_factory=list, description="an autonomous agent's task types"
    )


class JudgmentInfo(Wire):
    name: str
    description: str


class Agents(Wire):
    agents: list[AgentInfo]
    judgments: list[JudgmentInfo]


class Health(Wire):
    ok: Literal[True]


_DETAIL = (
    "what is up but not as it should be: the tools an MCP server's listing left out (and "
    "why), a listing served stale"
)


class Ready(Wire):
    ok: Literal[True]
    detail: dict[str, dict[str, Any]] = Field(default_factory=dict, description=_DETAIL)


class NotReady(Wire):
    ok: Literal[False]
    missing: dict[str, str] = Field(description="what is missing, and why")
    detail: dict[str, dict[str, Any]] = Field(default_factory=dict, description=_DETAIL)


class ListedApproval(Approval):
    kind: Literal["tool_call", "elicitation"] = Field(
        default="tool_call",
        description="elicitation: an MCP server's question during the call (arguments: its "
        "message and requestedSchema; approving sends content)",
    )
    session: str
    agent: str
    state: Literal["pending", "approved", "refused", "expired", "ended"]
    decided_by: str = ""
    reason: str = ""


class ApprovalListing(Wire):
    """One page of the approvals the caller may read, oldest first; ``next`` is the cursor of
    the page after (``?cursor=``), null on the last page."""

    approvals: list[ListedApproval]
    next: str | None = None


class DecisionAnswer(Wire):
    """``recorded`` (others of the turn still wait: ``pending``), ``completed`` (the turn
    resumed and finished: ``turn``), ``awaiting_approval`` (it resumed and waits again:
    ``approvals``) or ``resumed`` (a task's turn, resumed by its instance)."""

    approval: str
    decision: Literal["approved", "refused"]
    decided_by: str
    status: Literal["recorded", "completed", "awaiting_approval", "resumed"]
    pending: list[Approval] = Field(default_factory=list)
    approvals: list[Approval] = Field(default_factory=list)
    turn: TurnAnswer | SkipJsonSchema[None] = None


class TokenBudget(Wire):
    budget: int
    claimed: int = Field(description="its tree's spend and its working children's grants")


class Handoff(Wire):
    """One hand-on of a task: from which agent to which, when, and the note it was given."""

    from_: str = Field(alias="from")
    to: str
    at: Time
    note: str


class Iterations(Wire):
    used: int
    budget: int


class Attachment(Wire):
    name: str
    text: str | SkipJsonSchema[None] = None
    ref: str | SkipJsonSchema[None] = None


class Task(Wire):
    """A task's record; ``version`` grows with every change of it."""

    id: str
    name: str | None = Field(description="a name for people, when its creator gave one")
    agent: str
    type: str
    state: TaskState
    end: str | None = Field(description="how it ended, once final (its tree's view)")
    instance: str | None
    iterations: Iterations
    tree_iterations: int = Field(description="its own iterations and every descendant's")
    tokens: TokenBudget | None = Field(description="its token budget, when it has one")
    usage: Usage
    tree_usage: Usage = Field(description="its own tokens and every descendant's")
    parent: str | None = Field(description="the task that delegated it, if any")
    children: list[str] = Field(description="the tasks it delegated, in order")
    handoffs: list[Handoff] = Field(description="who handed it on to whom, oldest first")
    cost: Cost
    result: Any = Field(description="the typed result, once completed")
    reason: str | None
    depends_on: list[str]
    attachments: list[Attachment]
    cancel_requested: bool
    version: int
    created_by: str | None
    created_at: Time | None
    updated_at: Time | None


class Queued(Wire):
    task: str
    state: TaskState


class Instance(Wire):
    agent: str
    id: str
    state: InstanceState
    created_by: str | None
    current: str | None
    queue: list[Queued]
