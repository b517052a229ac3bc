"""Who may read, write and decide approvals for a session: the session policy.

A session (and a task, whose session is ``task:<id>``) is always its creator's and the
platform's (``ankka://platform/...``): they hold every right. An :class:`Access` declared on
the service (``Service(name, access=...)``) or on one agent (``service.agent(..., access=...)``,
``AutonomousAgent(..., access=...)``) names who else holds which right, by caller pattern:

- ``read``: read the session (its messages, summary, calls; a task's record and
  notifications; the approvals it waits for);
- ``write``: send it turns (a task: create it again, cancel it); implies ``read``;
- ``decide``: decide the approvals it waits for; implies ``read``.

A pattern is a caller's name (``local``, a static-token name, ``system:serviceaccount:shop:
reporter``, ``ankka://service/shop/web`` or its short form ``shop/web``), or such a name ending
in ``*`` for every caller it begins (``ankka://service/shop/*``, ``system:serviceaccount:shop:*``).
An agent's access replaces the service's for that agent's sessions. ``ankka serve
--access-file FILE`` overrides the declarations entry by entry (:func:`load_policy`); its
``approvers`` entry names delegates that may decide every session's approvals whoever created
it (``ankka approve``'s ServiceAccount in a cluster, which the operator renders: the API
server's RBAC decides who may act through it). Pure, except :func:`load_policy` reading its
file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from ankka._kernel.errors import ConfigurationError, RequestError
from ankka._kernel.identity import SERVICE_PREFIX, is_platform

__all__ = [
    "LOCAL",
    "Access",
    "NotPermitted",
    "Right",
    "SessionPolicy",
    "load_policy",
    "parse_access",
]

LOCAL = "local"
"""The caller a runtime on loopback without TLS or tokens trusts every caller as."""


class NotPermitted(RequestError):
    """The caller lacks the right it needs over a session (403)."""

    kind = "not_permitted"
    status = 403


Right = Literal["read", "write", "decide"]
RIGHTS: tuple[Right, ...] = get_args(Right)
MAX_PATTERN = 256
MAX_PATTERNS = 256
MAX_FILE = 1 << 20


def _pattern(raw: object, where: str) -> str:
    """The pattern as callers are named (a service by ``<namespace>/<agent>``), or refused."""
    if not isinstance(raw, str) or not raw.strip() or raw != raw.strip():
        raise ConfigurationError(f"{where}: {raw!r} is not a caller pattern (a non-empty name)")
    if len(raw) > MAX_PATTERN or any(c.isspace() or ord(c) < 32 for c in raw):
        raise ConfigurationError(
            f"{where}: {raw[:60]!r} is not a caller pattern (at most {MAX_PATTERN} characters, "
            "no spaces or control characters)"
        )
    if "*" in raw[:-1]:
        raise ConfigurationError(
            f"{where}: {raw!r} has a '*' before its end; a pattern is a caller's name, or the "
            "beginning of one followed by '*' (ankka://service/shop/*)"
        )
    return raw[len(SERVICE_PREFIX) :] if raw.startswith(SERVICE_PREFIX) else raw


def _matches(pattern: str, caller: str) -> bool:
    # A static token may name a service by its whole URI; a certificate names it short.
    caller = caller.removeprefix(SERVICE_PREFIX)
    if pattern.endswith("*"):
        return caller.startswith(pattern[:-1])
    return caller == pattern


@dataclass(frozen=True, slots=True)
class Access:
    """Who holds which right over a session besides its creator and the platform."""

    read: Sequence[str] = ()
    write: Sequence[str] = ()
    decide: Sequence[str] = ()
    where: str = field(default="access", compare=False)

    def __post_init__(self) -> None:
        for right in RIGHTS:
            raw = getattr(self, right)
            if isinstance(raw, str) or not isinstance(raw, Iterable):
                raise ConfigurationError(
                    f"{self.where}.{right}: give a list of caller patterns, not {raw!r}"
                )
            patterns = tuple(raw)
            if len(patterns) > MAX_PATTERNS:
                raise ConfigurationError(
                    f"{self.where}.{right}: more than {MAX_PATTERNS} caller patterns"
                )
            where = f"{self.where}.{right}"
            object.__setattr__(
                self, right, tuple(_pattern(p, f"{where}[{i}]") for i, p in enumerate(patterns))
            )

    def grants(self, caller: str, right: Right) -> bool:
        """Whether this access gives ``caller`` ``right`` (``write``/``decide`` imply read)."""
        held: tuple[Right, ...] = ("read", "write", "decide") if right == "read" else (right,)
        return any(_matches(p, caller) for r in held for p in getattr(self, r))

    def as_dict(self) -> dict[str, list[str]]:
        return {r: list(getattr(self, r)) for r in RIGHTS}


def parse_access(data: object, where: str) -> Access:
    """An :class:`Access` from its file form ``{"read": [...], "write": [...], ...}``."""
    if not isinstance(data, Mapping):
        raise ConfigurationError(f"{where}: write a mapping of read/write/decide to patterns")
    unknown = sorted(str(k) for k in data if k not in RIGHTS)
    if unknown:
        raise ConfigurationError(
            f"{where}: unknown right {unknown[0]!r}; the rights are read, write and decide"
        )
    return Access(
        read=_listed(data.get("read", []), f"{where}.read"),
        write=_listed(data.get("write", []), f"{where}.write"),
        decide=_listed(data.get("decide", []), f"{where}.decide"),
        where=where,
    )


def _listed(raw: object, where: str) -> list[str]:
    if not isinstance(raw, list):
        raise ConfigurationError(f"{where}: give a list of caller patterns, not {raw!r:.60}")
    return [_pattern(p, f"{where}[{i}]") for i, p in enumerate(raw)]


DEFAULT = Access(where="default")


@dataclass(frozen=True, slots=True)
class SessionPolicy:
    """The access in force per agent (an agent's own, else the service's)."""

    service: Access = DEFAULT
    agents: Mapping[str, Access] = field(default_factory=dict)
    # Delegates deciding for people (the file's approvers): decide over every session.
    approvers: tuple[str, ...] = ()

    def access(self, agent: str | None) -> Access:
        found = self.agents.get(agent) if agent is not None else None
        return found if found is not None else self.service

    def allows(self, caller: str, right: Right, *, creator: str | None, agent: str | None) -> bool:
        """Whether ``caller`` holds ``right`` over a session ``creator`` created for
        ``agent`` (``creator`` None: a new session, or one older than the creator record)."""
        if creator is None or caller == creator or is_platform(caller):
            return True
        if right == "decide" and self.is_approver(caller):
            return True
        return self.access(agent).grants(caller, right)

    def is_approver(self, caller: str) -> bool:
        """Whether ``caller`` is a delegate that decides for the person it names."""
        return any(_matches(p, caller) for p in self.approvers)

    def overridden(self, data: object, agents: Iterable[str], source: str) -> SessionPolicy:
        """This policy with a file's entries in place of the declared ones; ``agents`` are
        the service's agent names (an entry naming another is refused)."""
        if not isinstance(data, Mapping):
            raise ConfigurationError(f"{source}: write a mapping with 'service' and/or 'agents'")
        unknown = sorted(str(k) for k in data if k not in ("service", "agents", "approvers"))
        if unknown:
            raise ConfigurationError(
                f"{source}: unknown entry {unknown[0]!r}; the entries are service, agents "
                "and approvers"
            )
        approvers = self.approvers
        if "approvers" in data:
            approvers = tuple(_listed(data["approvers"], f"{source}: approvers"))
        service = self.service
        if "service" in data:
            service = parse_access(data["service"], f"{source}: service")
        named = data.get("agents", {})
        if not isinstance(named, Mapping):
            raise ConfigurationError(f"{source}: agents is a mapping of agent name to access")
        known = set(agents)
        merged = dict(self.agents)
        for name, entry in named.items():
            if name not in known:
                choices = ", ".join(sorted(known)) or "none"
                raise ConfigurationError(
                    f"{source}: agents.{name}: no such agent in the service (agents: {choices})"
                )
            merged[name] = parse_access(entry, f"{source}: agents.{name}")
        return SessionPolicy(service, merged, approvers)

    def as_dict(self) -> dict[str, Any]:
        return {
            "service": self.service.as_dict(),
            "agents": {n: a.as_dict() for n, a in sorted(self.agents.items())},
            "approvers": list(self.approvers),
        }


def load_policy(path: str | Path, base: SessionPolicy, agents: Iterable[str]) -> SessionPolicy:
    """``base`` overridden by the file at ``path`` (YAML or JSON), or a clear refusal."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_FILE + 1)
    except OSError as exc:
        raise ConfigurationError(f"cannot read the access file {path}: {exc.strerror}") from exc
    if len(raw) > MAX_FILE:
        raise ConfigurationError(f"the access file {path} is larger than {MAX_FILE} bytes")
    import yaml  # only with --access-file: a start without one does without it

    try:
        data = yaml.safe_load(raw.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigurationError(f"the access file {path} is not YAML or JSON: {exc}") from exc
    return base.overridden(data if data is not None else {}, agents, str(path))
