"""The approvals' errors, under the one tree."""

from __future__ import annotations

from ankka._kernel.errors import AnkkaError, RequestError

__all__ = ["ApprovalConflict", "HandlerGone"]


class ApprovalConflict(RequestError):
    """The decision or the turn clashes with what the journal holds."""

    kind = "conflict"
    status = 409


class HandlerGone(AnkkaError):
    """The suspended turn's agent is no longer declared: the turn is ended, never run as
    another handler."""

    kind = "internal_error"
    status = 500
