"""Compaction settings: a character limit, what stays verbatim, who summarises and how.

Declared on a :class:`~ankka.runtime.declare.agents.Turn` (``Turn(compaction=Compaction(...))``) or
as an agent's default (``service.agent("chat", compaction=...)``); on a cluster the Agent
resource's ``spec.compaction`` reaches the runtime as ``ANKKA_COMPACTION_*`` variables
(:func:`from_environment`), which override what the code declares, field by field.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.records.messages import Message

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "ENV_PREFIX",
    "Compaction",
    "SummaryCheck",
    "from_environment",
]

DEFAULT_INSTRUCTIONS = (
    "You summarise the earlier part of a conversation so that it can go on without those "
    "messages. Keep every fact, decision, open question, name, number and identifier (order "
    "numbers, ids, dates, amounts) exactly as written. Fold the earlier summary, if there is "
    "one, into the new summary. Write plain prose, much shorter than the conversation, and "
    "answer with the summary only."
)

ENV_PREFIX = "ANKKA_COMPACTION_"
_MOST_KEPT = 10_000  # the Agent resource's schema holds the same bounds
_LONGEST_INSTRUCTIONS = 20_000

CheckFunction = Callable[[str, Sequence[Message]], "str | Awaitable[str | None] | None"]


@dataclass(frozen=True, slots=True)
class SummaryCheck:
    """A declared check on a summary: ``check(summary, replaced)`` returns ``None`` to pass
    or a reason to reject it (``replaced`` is what the summary would stand for, the earlier
    summary first). A rejected summary is recorded and never adopted."""

    name: str
    check: CheckFunction


@dataclass(frozen=True, slots=True, kw_only=True)
class Compaction:
    """When and how a session's memory is compacted.

    - ``limit_chars``: what the model is sent from memory stays under this many characters
      (characters, not tokens: set it well below the model's window).
    - ``start_chars``: compaction is queued once memory passes this (default: three quarters
      of the limit), so the summary lands before the limit is reached; the turn that passes
      it never waits.
    - ``keep_messages``: at least this many recent messages stay verbatim (rounded up to
      whole turns, so a tool call is never separated from its result).
    - ``model``: the model that summarises (a configured model name; default: the agent's).
    - ``instructions``: what the summariser is told.
    - ``checks``: declared checks a summary must pass, after the built-in ones.
    """

    limit_chars: int
    keep_messages: int = 6
    start_chars: int | None = None
    model: str | None = None
    instructions: str = DEFAULT_INSTRUCTIONS
    checks: Sequence[SummaryCheck] = field(default=())

    def __post_init__(self) -> None:
        if self.limit_chars < 100:
            raise ConfigurationError(
                f"compaction limit_chars must be at least 100 characters, not {self.limit_chars}"
            )
        if not 0 <= self.keep_messages <= _MOST_KEPT:
            raise ConfigurationError(
                f"compaction keep_messages must be between 0 and {_MOST_KEPT}, "
                f"not {self.keep_messages}"
            )
        if self.start_chars is not None and not 0 < self.start_chars <= self.limit_chars:
            raise ConfigurationError(
                f"compaction start_chars must be between 1 and limit_chars "
                f"({self.limit_chars}), not {self.start_chars}"
            )
        if not self.instructions.strip() or len(self.instructions) > _LONGEST_INSTRUCTIONS:
            raise ConfigurationError(
                f"compaction instructions must be 1 to {_LONGEST_INSTRUCTIONS} characters, "
                f"not {len(self.instructions)}"
            )
        if self.model is not None and not self.model:
            raise ConfigurationError("compaction model cannot be an empty name")
        names = [c.name for c in self.checks]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"two summary checks share a name: {names}")

    @property
    def start(self) -> int:
        """Memory characters past which compaction is queued."""
        return self.start_chars if self.start_chars is not None else self.limit_chars * 3 // 4

    @property
    def max_replaced_chars(self) -> int:
        """The most one summarisation is given to read (a session that was long before it
        had a limit is compacted in several steps, oldest first)."""
        return self.limit_chars * 8

    @property
    def min_new_chars(self) -> int:
        """The least a summarisation folds in besides the earlier summary: an eighth of the
        limit."""
        return self.limit_chars // 8


_FIELDS = {
    "LIMIT_CHARS": "limit_chars",
    "START_CHARS": "start_chars",
    "KEEP_MESSAGES": "keep_messages",
    "MODEL": "model",
    "INSTRUCTIONS": "instructions",
}
_NUMBERS = {"limit_chars", "start_chars", "keep_messages"}


@dataclass(frozen=True, slots=True)
class CompactionOverride:
    """What the deployment sets (``ANKKA_COMPACTION_*``), applied over the code's settings."""

    values: Mapping[str, int | str]

    def apply(self, declared: Compaction | None) -> Compaction | None:
        """The settings in force for an agent that declared ``declared``. An agent that
        declared none is compacted only when the deployment sets a limit."""
        if not self.values:
            return declared
        if declared is None:
            if "limit_chars" not in self.values:
                return None
            return Compaction(**self.values)  # type: ignore[arg-type]
        return replace(declared, **self.values)  # type: ignore[arg-type]


def from_environment(env: Mapping[str, str]) -> CompactionOverride:
    """Read ``ANKKA_COMPACTION_LIMIT_CHARS``, ``_START_CHARS``, ``_KEEP_MESSAGES``, ``_MODEL``
    and ``_INSTRUCTIONS``. A variable under the prefix that is no setting, or a number that
    is not one, is refused, named."""
    values: dict[str, int | str] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX):
            continue
        key = _FIELDS.get(name.removeprefix(ENV_PREFIX))
        if key is None:
            known = ", ".join(ENV_PREFIX + k for k in _FIELDS)
            raise ConfigurationError(f"{name} is no compaction setting (settings: {known})")
        if key in _NUMBERS:
            try:
                values[key] = int(raw)
            except ValueError:
                raise ConfigurationError(f"{name}={raw!r} is not a whole number") from None
        else:
            values[key] = raw
    override = CompactionOverride(values)
    probe = dict(values)
    if probe:  # validate now, so a bad deployment fails at start, not at the first compaction
        probe.setdefault("limit_chars", max(100, int(probe.get("start_chars", 100))))
        Compaction(**probe)  # type: ignore[arg-type]
    return override
