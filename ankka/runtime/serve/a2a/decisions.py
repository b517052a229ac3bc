"""Approval decisions carried by an A2A message to a task that is ``INPUT_REQUIRED``. Pure.

A data part ``{"decision": "approve"|"refuse", "approval": ID, "digest": DIGEST, "reason"?}``
(or ``{"decisions": [...]}`` of those), or, while exactly one request waits, the text
``approve`` or ``refuse`` (``approve: why``). The digest binds a decision to the arguments the
decider was shown (docs/approvals.md); left out while one request waits, it is that request's,
the one the task's status message showed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InvalidParamsError

from ankka.runtime.serve.a2a.wire import data_value

__all__ = ["Decision", "decisions_of"]

_WORDS: dict[str, Literal["approved", "refused"]] = {
    "approve": "approved",
    "approved": "approved",
    "yes": "approved",
    "refuse": "refused",
    "refused": "refused",
    "no": "refused",
}


@dataclass(frozen=True, slots=True)
class Decision:
    approval: str
    decision: Literal["approved", "refused"]
    digest: str | None
    reason: str


def _one(item: Any, pending: Sequence[dict[str, Any]]) -> Decision:
    if not isinstance(item, dict):
        raise InvalidParamsError(message="a decision is an object {decision, approval, digest}")
    word = str(item.get("decision", "")).strip().lower()
    if word not in _WORDS:
        raise InvalidParamsError(message='a decision says "approve" or "refuse"')
    approval = item.get("approval") or item.get("id")
    digest = item.get("digest")
    if approval is None:
        if len(pending) != 1:
            raise InvalidParamsError(
                message=f"{len(pending)} requests wait: name the approval (and its digest)"
            )
        approval = pending[0]["id"]
        digest = digest or pending[0]["digest"]
    elif digest is None:
        digest = next((p["digest"] for p in pending if p["id"] == approval), None)
    return Decision(str(approval), _WORDS[word], digest, str(item.get("reason") or "")[:2000])


def decisions_of(message: pb.Message, pending: Sequence[dict[str, Any]]) -> list[Decision]:
    """The decisions ``message`` carries for the ``pending`` requests (as the runtime shows
    them: id, digest, ...)."""
    data = data_value(message)
    if isinstance(data, dict) and isinstance(data.get("decisions"), list):
        return [_one(item, pending) for item in data["decisions"]]
    if isinstance(data, dict):
        return [_one(data, pending)]
    text = " ".join(p.text for p in message.parts if p.WhichOneof("content") == "text").strip()
    word, _, why = text.partition(":")
    if word.strip().lower() in _WORDS:
        return [_one({"decision": word.strip(), "reason": why.strip()}, pending)]
    raise InvalidParamsError(
        message="the task waits for approval: send approve or refuse (see its status message)"
    )
