"""The approvals' errors, under the one tree, and the two refusals of a decision."""

from __future__ import annotations

from ankka._kernel.errors import RequestError, TurnFailed
from ankka.runtime.records.approvals import ApprovalDecided, ApprovalRequest

__all__ = ["ApprovalConflict", "HandlerGone", "SessionBusy", "refuse_decided", "refuse_digest"]


class ApprovalConflict(RequestError):
    """The decision or the turn clashes with what the journal holds."""

    kind = "conflict"
    status = 409


class HandlerGone(TurnFailed):
    """The suspended turn's agent is no longer declared: the turn is ended, never run as
    another handler."""

    kind = "internal_error"
    status = 500


class SessionBusy(RequestError):
    """A decision made with a bound on its wait found the session in a turn all that time:
    nothing was decided (the approval timers try again at a later tick)."""

    kind = "conflict"
    status = 409


def refuse_decided(approval: str, first: ApprovalDecided | None) -> None:
    """Raise the 409 naming the first decision, if there was one."""
    if first is not None:
        raise ApprovalConflict(
            f"approval {approval!r} was already decided: {first.decision} by "
            f"{first.decided_by} at {first.at.isoformat()}"
            + (f" ({first.reason})" if first.reason else "")
        )


def refuse_digest(approval: str, request: ApprovalRequest, given: str | None) -> None:
    """Raise the 409 for a decision made on other arguments (or another request)."""
    if given is not None and given != request.digest:
        raise ApprovalConflict(
            f"approval {approval!r}: the digest sent does not match the request's (the "
            "decision was made on other arguments, or another request); read it again from "
            "GET /v1/approvals"
        )
