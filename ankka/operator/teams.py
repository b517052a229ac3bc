"""Pure builders for Team resources: which team a resource names, and its status from what
its Agent's runtime answered.

A Team names an Agent and a team of that Agent's module; the operator reads the team's
summary from the runtime (``GET /v1/teams/{team}/summary``: ``counts`` by state and the
``budget``, counted by the store) and mirrors them, never the items: etcd is no journal, and
the items (their instructions and results) stay in the runtime's store. A runtime older than
the summary route is read from its listing (``GET /v1/teams/{team}/items``, whose answer
carries ``counts`` too, but no budget).

Phase rules (:func:`reading_of`, :func:`waiting`):

- **Active**: the runtime answered the backlog (200); the counts (and the budget, from a
  summary) are its.
- **Waiting**: the Agent is missing, held for its models or not rendered yet, or its runtime
  cannot be reached or answered 5xx. Something else will change that, so the counts last read
  are kept (the backlog is still there, only unread).
- **Failed**: the Agent failed, or its runtime answered that it serves no such team (404,
  naming the teams it does), or refused the operator (4xx). The counts are cleared: there is
  no backlog to count. Not final: every round reads again, so a Team fixed (its spec, or the
  Agent's module) turns Active by itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ankka.api.resources import TeamCounts, TeamPhase, TeamSpec

__all__ = [
    "MAX_REASON",
    "SERVED",
    "STATES",
    "Reading",
    "budget_of",
    "counts_of",
    "reading_of",
    "status_fields",
    "team_name",
    "waiting",
]

SERVED = "Served"
MAX_REASON = 1024
STATES: tuple[str, ...] = tuple(TeamCounts.model_fields)
# Reasons of an Agent that will not serve until someone changes it (the rest are waits).
_FAILED_AGENT = frozenset({"AgentFailed"})


@dataclass(frozen=True)
class Reading:
    """What one round found: a phase, the Served condition's reason and message, and the
    counts by state when the runtime answered the backlog (None: keep or clear, by phase)."""

    phase: TeamPhase
    reason: str
    message: str
    counts: dict[str, int] | None = field(default=None)
    budget: dict[str, Any] | None = field(default=None)  # from a summary, camelCase-free


def team_name(name: str, spec: TeamSpec) -> str:
    """The team's name at the runtime: ``spec.team``, else the resource's own name."""
    return spec.team or name


def counts_of(listing: Mapping[str, Any]) -> dict[str, int]:
    """Every state's count from a listing's ``counts`` (a state it leaves out is 0; a state
    this operator does not know, from a newer runtime, is left out, not guessed at)."""
    raw = listing.get("counts")
    given = raw if isinstance(raw, Mapping) else {}
    out: dict[str, int] = {}
    for state in STATES:
        out[state] = _count(given.get(state, 0))
    return out


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def budget_of(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The status's ``budget`` from a summary's (None when it has none): each of iterations
    and tokens with its ``limit`` (left out: unlimited), ``used`` and ``reserved``; a value
    that is no count is 0, not guessed at."""
    raw = summary.get("budget")
    if not isinstance(raw, Mapping):
        return None
    out: dict[str, Any] = {}
    for kind in ("iterations", "tokens"):
        given = raw.get(kind)
        if not isinstance(given, Mapping):
            continue
        limit = given.get("limit")
        shown = {"used": _count(given.get("used")), "reserved": _count(given.get("reserved"))}
        # An unlimited budget has no limit: left out, as the status comes back without it.
        out[kind] = shown if limit is None else {"limit": _count(limit), **shown}
    return out


def _error_message(body: Any) -> str:
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"])
    return ""


def waiting(reason: str, message: str) -> Reading:
    """The Agent cannot be reached yet (``task_reconcile.agent_runtime``'s reasons): Waiting,
    or Failed for an Agent that failed."""
    phase = TeamPhase.FAILED if reason in _FAILED_AGENT else TeamPhase.WAITING
    return Reading(phase, reason, message)


def reading_of(
    status_code: int,
    body: Any,
    *,
    team: str,
    agent: str,
    address: str,
    summary: bool = True,
) -> Reading:
    """What the runtime's answer to ``GET /v1/teams/{team}/summary`` (``summary``) or, from
    a runtime without that route, to ``GET /v1/teams/{team}/items`` means for the Team."""
    said = _error_message(body)
    if status_code == 200 and isinstance(body, Mapping):
        counts = counts_of(body)
        return Reading(
            TeamPhase.ACTIVE,
            "Summarised" if summary else "Listed",
            f"the runtime at {address} serves team {team!r}: {sum(counts.values())} items",
            counts,
            budget_of(body) if summary else None,
        )
    if status_code == 200:
        return Reading(
            TeamPhase.WAITING,
            "RuntimeUnavailable",
            f"the runtime at {address} answered team {team!r}'s backlog with no listing",
        )
    if status_code == 404:
        return Reading(
            TeamPhase.FAILED,
            "TeamNotServed",
            f"Agent {agent!r}'s runtime serves no team {team!r}: {said or 'not found'}. Name "
            "one its module declares in spec.team (or name the Team after it)",
        )
    if status_code >= 500:
        return Reading(
            TeamPhase.WAITING,
            "RuntimeUnavailable",
            f"the runtime at {address} answered {status_code}: {said or 'no message'}",
        )
    return Reading(
        TeamPhase.FAILED,
        "Refused",
        f"the runtime at {address} refused to list team {team!r}'s backlog "
        f"({status_code}): {said or 'no message'}",
    )


def _cut(text: str) -> str:
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def _limits_dropped(budget: dict[str, Any] | None, old: object) -> dict[str, Any] | None:
    """``budget`` as the status's merge patch writes it: null (a merge patch takes an old one
    away), or with ``limit: null`` where the old status has a limit the team no longer sets,
    as a key left out of a merge patch is kept (the stale limit shown, and the status written
    again every round, never the same as the reading)."""
    if budget is None or not isinstance(old, Mapping):
        return budget
    out = dict(budget)
    for kind, shown in budget.items():
        was = old.get(kind)
        if isinstance(was, Mapping) and "limit" in was and "limit" not in shown:
            out[kind] = {"limit": None, **shown}
    return out


def status_fields(reading: Reading, *, team: str, old: Mapping[str, Any]) -> dict[str, Any]:
    """The status fields (camelCase, bar the conditions) of a round's reading, ``old`` the
    status as it stands (Waiting keeps its counts)."""
    fields: dict[str, Any] = {"phase": reading.phase.value, "team": team}
    if reading.counts is not None:
        counts = reading.counts
    elif reading.phase is TeamPhase.WAITING and isinstance(old.get("counts"), Mapping):
        counts = counts_of({"counts": old["counts"]})
    else:
        counts = dict.fromkeys(STATES, 0)
    fields["counts"] = counts
    fields["items"] = sum(counts.values())
    budget = reading.budget
    if budget is None and reading.phase is TeamPhase.WAITING:
        budget = old.get("budget") if isinstance(old.get("budget"), Mapping) else None
    fields["budget"] = _limits_dropped(budget, old.get("budget"))
    fields["reason"] = None if reading.phase is TeamPhase.ACTIVE else _cut(reading.message)
    return fields
