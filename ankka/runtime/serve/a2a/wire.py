"""A2A's wire objects from ankka's own values, and back: pure, no I/O.

The SDK's protobuf types (``a2a.types``) are the wire: the bindings (JSON-RPC, HTTP+JSON)
serialise them. What ankka says about a task (:class:`TaskView`, built by the handler from a
turn's record or a runtime task) becomes a ``Task``; a message's parts become the text a turn
or a task is given.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf import json_format, struct_pb2

__all__ = [
    "FINAL",
    "INTERRUPTED",
    "STATES",
    "TaskView",
    "derived_id",
    "message_text",
    "state_name",
    "to_task",
]

STATES: dict[str, int] = {
    "submitted": pb.TASK_STATE_SUBMITTED,
    "working": pb.TASK_STATE_WORKING,
    "completed": pb.TASK_STATE_COMPLETED,
    "failed": pb.TASK_STATE_FAILED,
    "canceled": pb.TASK_STATE_CANCELED,
    "input-required": pb.TASK_STATE_INPUT_REQUIRED,
    "rejected": pb.TASK_STATE_REJECTED,
    "auth-required": pb.TASK_STATE_AUTH_REQUIRED,
}
_NAMES = {value: name for name, value in STATES.items()}
FINAL = frozenset({"completed", "failed", "canceled", "rejected"})
INTERRUPTED = frozenset({"input-required", "auth-required"})
MAX_TEXT = 100_000


def state_name(state: int) -> str:
    """The short name ankka stores for an A2A task state."""
    return _NAMES.get(state, "submitted")


def derived_id(prefix: str, *parts: str) -> str:
    """An id derived from ``parts`` (the same parts, the same id): letters and digits only, so
    it is a valid id everywhere ankka keeps one (tasks, turns, sessions)."""
    digest = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]
    return f"{prefix}-{digest}"


def message_text(message: pb.Message) -> str:
    """What a message says, as the one text a turn or a task is given: its text parts, and its
    data parts as JSON, in order. A file (``raw`` or ``url``) is not taken: ankka's agents read
    text (the card says so in its input modes)."""
    pieces: list[str] = []
    for index, part in enumerate(message.parts, 1):
        kind = part.WhichOneof("content")
        if kind == "text":
            pieces.append(part.text)
        elif kind == "data":
            value = json_format.MessageToDict(part.data)
            pieces.append(json.dumps(value, ensure_ascii=False, sort_keys=True))
        else:
            raise ContentTypeNotSupportedError(
                message=f"part {index} is a file ({kind}); this agent takes text and JSON data "
                "parts only (text/plain, application/json)"
            )
    text = "\n".join(p for p in pieces if p)
    if not text.strip():
        raise InvalidParamsError(message="the message has no text: send a text or data part")
    if len(text) > MAX_TEXT:
        raise InvalidParamsError(message=f"the message is longer than {MAX_TEXT} characters")
    return text


def data_value(message: pb.Message) -> Any:
    """The first data part's value (None without one)."""
    for part in message.parts:
        if part.WhichOneof("content") == "data":
            return json_format.MessageToDict(part.data)
    return None


def _part(value: object) -> pb.Part:
    if isinstance(value, str):
        return pb.Part(text=value)
    part = pb.Part(media_type="application/json")
    part.data.CopyFrom(json_format.ParseDict(value, struct_pb2.Value()))  # type: ignore[arg-type]
    return part


def _struct(value: Mapping[str, Any]) -> struct_pb2.Struct:
    return json_format.ParseDict(dict(value), struct_pb2.Struct())


@dataclass(frozen=True, slots=True)
class Said:
    """One message of a task's history: who, what (text, or JSON data), its id."""

    role: str  # "user" or "agent"
    content: object
    message_id: str


@dataclass(frozen=True, slots=True)
class TaskView:
    """An A2A task as ankka knows it, before it is put on the wire."""

    id: str
    context_id: str
    state: str
    at: datetime | None
    status: object = None  # the status message's content: text, or JSON data
    result: object = None  # the artifact's content (None: no artifact yet)
    history: Sequence[Said] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def final(self) -> bool:
        return self.state in FINAL

    def signature(self) -> str:
        """What an update event is made for: a change of state or status message."""
        return json.dumps([self.state, self.status], sort_keys=True, default=str)


def _timestamp(at: datetime | None) -> str:
    when = (at or datetime.now(UTC)).astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _message(view: TaskView, said: Said) -> pb.Message:
    role = pb.ROLE_USER if said.role == "user" else pb.ROLE_AGENT
    return pb.Message(
        message_id=said.message_id,
        context_id=view.context_id,
        task_id=view.id,
        role=role,
        parts=[_part(said.content)],
    )


def status_of(view: TaskView) -> pb.TaskStatus:
    status = pb.TaskStatus(state=STATES[view.state])  # type: ignore[arg-type]
    status.timestamp.FromJsonString(_timestamp(view.at))
    if view.status is not None:
        said = Said("agent", view.status, f"{view.id}:status:{view.state}")
        status.message.CopyFrom(_message(view, said))
    return status


def artifact_of(view: TaskView) -> pb.Artifact:
    return pb.Artifact(artifact_id=f"{view.id}:result", name="result", parts=[_part(view.result)])


def to_task(
    view: TaskView, *, history_length: int | None = None, artifacts: bool = True
) -> pb.Task:
    """The wire task; ``history_length`` as the spec's historyLength (None: all, 0: none)."""
    task = pb.Task(id=view.id, context_id=view.context_id)
    task.status.CopyFrom(status_of(view))
    if artifacts and view.result is not None:
        task.artifacts.append(artifact_of(view))
    history = list(view.history)
    if history_length is not None:
        history = history[-history_length:] if history_length > 0 else []
    task.history.extend(_message(view, said) for said in history)
    if view.metadata:
        task.metadata.CopyFrom(_struct(view.metadata))
    return task


def status_event(view: TaskView) -> pb.TaskStatusUpdateEvent:
    event = pb.TaskStatusUpdateEvent(task_id=view.id, context_id=view.context_id)
    event.status.CopyFrom(status_of(view))
    return event


def artifact_event(
    view: TaskView, text: str | None = None, *, append: bool = False, last: bool = True
) -> pb.TaskArtifactUpdateEvent:
    """The result as an artifact update (``text``: one streamed piece of it)."""
    artifact = artifact_of(view) if text is None else pb.Artifact(
        artifact_id=f"{view.id}:result", name="result", parts=[pb.Part(text=text)]
    )  # fmt: skip
    return pb.TaskArtifactUpdateEvent(
        task_id=view.id, context_id=view.context_id, artifact=artifact, append=append,
        last_chunk=last,
    )  # fmt: skip
