"""The approval records of a session's journal, and the digest that binds a decision to a call.

A suspended turn is one :class:`TurnSuspended` (the request's input, the turn's messages so
far, the calls that wait); each decision is one :class:`ApprovalDecided`; an approved call's
start is one :class:`ApprovedCallStarted`, appended before the tool runs, which *spends* the
approval: a resume that finds it recorded never runs the call again. A turn that cannot go on
is closed by :class:`TurnEnded`. A server's question during a call and its answer is one
:class:`ElicitationAnswered`. Pure values; their encodings are pinned in
``tests/unit/runtime/drivers/test_approvals.py``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal

from ankka._kernel.ids import new_id
from ankka.runtime.records.messages import MESSAGE_TYPES, Message, ModelCall, ToolCall

__all__ = [
    "APPROVAL_RECORD_TYPES",
    "ApprovalDecided",
    "ApprovalRecord",
    "ApprovalRequest",
    "ApprovedCallStarted",
    "Decision",
    "ElicitationAnswered",
    "ResumedCall",
    "TurnEnded",
    "TurnSuspended",
    "canonical_arguments",
    "digest",
    "requests_for",
]

Decision = Literal["approved", "refused", "expired", "ended"]
"""``ended``: the platform closed a server's question whose turn ended without an answer."""
DECISIONS: tuple[Decision, ...] = ("approved", "refused", "expired", "ended")

_BY_ROLE = {t.role: t for t in MESSAGE_TYPES}


def canonical_arguments(raw: str) -> str:
    """The arguments as canonical JSON (sorted keys, no spaces); the raw text when it is not
    JSON (such a call needs approval only when its tool requires it of every call)."""
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return raw
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(tool: str, raw_arguments: str, call_id: str, position: int) -> str:
    """SHA-256 over (tool name, canonical JSON of the arguments, call id, the journal position
    of the suspension), hex. Whoever decides sends it back: a decision made on other arguments
    (or another suspension of the same call id) does not match."""
    payload = json.dumps(
        [tool, canonical_arguments(raw_arguments), call_id, position],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _parse_time(value: object) -> datetime | None:
    return datetime.fromisoformat(str(value)) if value is not None else None


def _message(data: dict[str, Any]) -> Message:
    return _BY_ROLE[str(data["role"])].from_dict(data)


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One call that waits: bound to its call id and arguments by ``digest``."""

    id: str
    call_id: str
    tool: str
    arguments: str
    digest: str
    expires_at: datetime | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "call_id": self.call_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "digest": self.digest,
            "expires_at": _time(self.expires_at),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ApprovalRequest:
        return cls(
            str(data["id"]),
            str(data["call_id"]),
            str(data["tool"]),
            str(data["arguments"]),
            str(data["digest"]),
            _parse_time(data.get("expires_at")),
        )

    def shown(self) -> dict[str, Any]:
        """What the API shows: the arguments decoded when they are JSON."""
        try:
            arguments: object = json.loads(self.arguments or "{}")
        except ValueError:
            arguments = self.arguments
        return {
            "id": self.id,
            "tool": self.tool,
            "arguments": arguments,
            "digest": self.digest,
            "expires_at": _time(self.expires_at),
        }


@dataclass(frozen=True, slots=True)
class TurnSuspended:
    """A turn stopped before calls that wait: enough to build it again and go on."""

    kind: ClassVar[str] = "turn_suspended"

    turn: str
    agent: str
    message: str
    messages: tuple[Message, ...]
    requests: tuple[ApprovalRequest, ...]
    trace: Mapping[str, str] = field(default_factory=dict, compare=False)
    """The suspended invocation's W3C context (``traceparent``, ``tracestate``) when tracing
    was on, so each request's wait joins that trace however it is decided; omitted when
    empty (a record written before it, or with tracing off, has none)."""

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "turn": self.turn,
            "agent": self.agent,
            "message": self.message,
            "messages": [m.as_dict() for m in self.messages],
            "requests": [r.as_dict() for r in self.requests],
        }
        trace = _trace(self.trace)
        if trace:
            data["trace"] = trace
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TurnSuspended:
        return cls(
            str(data["turn"]),
            str(data["agent"]),
            str(data["message"]),
            tuple(_message(m) for m in data["messages"]),
            tuple(ApprovalRequest.from_dict(r) for r in data["requests"]),
            _trace(data.get("trace")),
        )


_TRACE_KEYS = ("traceparent", "tracestate")
_TRACE_LIMIT = 1024  # a traceparent is 55 characters, a tracestate at most 512


def _trace(found: object) -> dict[str, str]:
    """The W3C context kept from ``found``: its ``traceparent`` and ``tracestate`` when they
    are strings, and nothing without a ``traceparent`` or past :data:`_TRACE_LIMIT`."""
    if not isinstance(found, Mapping):
        return {}
    kept = {k: v for k in _TRACE_KEYS if isinstance(v := found.get(k), str)}
    if "traceparent" not in kept or sum(len(v) for v in kept.values()) > _TRACE_LIMIT:
        return {}
    return kept


@dataclass(frozen=True, slots=True)
class ApprovalDecided:
    """A decision, recorded before anything it allows runs. ``decided_by`` is the caller's
    identity (a client certificate's URI SAN, a trusted proxy's header), or ``platform`` for
    an expiry."""

    kind: ClassVar[str] = "approval_decided"

    approval: str
    turn: str
    decision: Decision
    reason: str
    decided_by: str
    at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {
            "approval": self.approval,
            "turn": self.turn,
            "decision": self.decision,
            "reason": self.reason,
            "decided_by": self.decided_by,
            "at": self.at.isoformat(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ApprovalDecided:
        decision = str(data["decision"])
        if decision not in DECISIONS:
            raise ValueError(f"unknown decision {decision!r}")
        return cls(
            str(data["approval"]),
            str(data["turn"]),
            decision,
            str(data.get("reason", "")),
            str(data["decided_by"]),
            datetime.fromisoformat(str(data["at"])),
        )


@dataclass(frozen=True, slots=True)
class ApprovedCallStarted:
    """An approved call is about to run: appended before the tool is called, it spends the
    approval, so the call is never run a second time."""

    kind: ClassVar[str] = "approved_call_started"

    approval: str
    turn: str
    call_id: str
    digest: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "approval": self.approval,
            "turn": self.turn,
            "call_id": self.call_id,
            "digest": self.digest,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ApprovedCallStarted:
        return cls(
            str(data["approval"]), str(data["turn"]), str(data["call_id"]), str(data["digest"])
        )


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """A suspended turn that will not go on: cut off after its last decision (a crash), its
    handler gone, or failed while resuming. ``reason`` says so to whoever reads the session."""

    kind: ClassVar[str] = "turn_ended"

    turn: str
    cause: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "cause": self.cause, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TurnEnded:
        return cls(str(data["turn"]), str(data["cause"]), str(data["reason"]))


@dataclass(frozen=True, slots=True)
class ResumedCall:
    """A model call a resumed turn made, appended as its answer returned and before the turn
    acts on it. Never summed by itself: a turn that is written carries its calls on its
    answers, and one its resumer ends accounts for every call it made; only a turn cut off
    while resuming (its process killed) is accounted from these, in its ``turn_ended``'s
    append, so each call is counted once."""

    kind: ClassVar[str] = "resumed_call"

    turn: str
    call: ModelCall

    def as_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "call": self.call.as_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ResumedCall:
        return cls(str(data["turn"]), ModelCall.from_dict(data["call"]))


@dataclass(frozen=True, slots=True)
class ElicitationAnswered:
    """A server's question (an elicitation during the call ``request.call_id``) and what was
    sent back, once: ``action`` ``accept`` (with ``content``), ``decline`` or ``cancel``.
    ``request.arguments`` is the canonical JSON of ``{"message", "requestedSchema"}``, so
    the digest binds the decision to the question as the person saw it. Journaled with the
    turn's records (a request turn's batch, a task's next append)."""

    kind: ClassVar[str] = "elicitation_answered"

    server: str
    request: ApprovalRequest
    decided: ApprovalDecided
    action: str
    content: dict[str, Any] | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "request": self.request.as_dict(),
            "decided": self.decided.as_dict(),
            "action": self.action,
            "content": self.content,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ElicitationAnswered:
        content = data.get("content")
        return cls(
            str(data["server"]),
            ApprovalRequest.from_dict(data["request"]),
            ApprovalDecided.from_dict(data["decided"]),
            str(data["action"]),
            dict(content) if isinstance(content, dict) else None,
        )


ApprovalRecord = (
    TurnSuspended
    | ApprovalDecided
    | ApprovedCallStarted
    | TurnEnded
    | ResumedCall
    | ElicitationAnswered
)

APPROVAL_RECORD_TYPES: tuple[type[ApprovalRecord], ...] = (
    TurnSuspended,
    ApprovalDecided,
    ApprovedCallStarted,
    TurnEnded,
    ResumedCall,
    ElicitationAnswered,
)


def requests_for(
    calls: Sequence[ToolCall],
    timeout_of: Callable[[ToolCall], float | None],
    *,
    position: int,
    now: datetime,
) -> tuple[ApprovalRequest, ...]:
    """A request per call, bound by its digest to the suspension at ``position``."""
    out = []
    for call in calls:
        timeout = timeout_of(call)
        out.append(
            ApprovalRequest(
                new_id("apr"),
                call.id,
                call.name,
                call.arguments,
                digest(call.name, call.arguments, call.id, position),
                now + timedelta(seconds=timeout) if timeout is not None else None,
            )
        )
    return tuple(out)
