"""The checks a summary must pass before it is adopted: pure, in order, first failure wins.

1. ``empty``: a summary with no text is never adopted.
2. ``longer_than_replaced``: a summary longer than what it replaces would make memory grow.
3. ``identifier_missing``: every identifier the user gave in the replaced messages must still
   appear (case-insensitively): words with a digit in the user's messages (order numbers,
   ids, dates, amounts) and the values of the tool calls' arguments (names, numbers). The
   earlier summary's own identifiers are not re-required, so a summary can let go of old
   detail instead of growing for ever.
4. Declared checks (:class:`~ankka.runtime.declare.compaction.SummaryCheck`), in order.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ankka.runtime.declare.compaction import SummaryCheck
from ankka.runtime.records.messages import AssistantMessage, Message, UserMessage

__all__ = ["Verdict", "check_summary", "identifiers"]

_WORD = re.compile(r"[\w#][\w#\-./:@]*")
_MAX_VALUE = 64  # longer argument values are text, not identifiers
_SHOWN = 5


@dataclass(frozen=True, slots=True)
class Verdict:
    reason: str
    detail: str


def _user_words(text: str) -> Iterator[str]:
    for match in _WORD.finditer(text):
        word = match.group().rstrip(".:-/")
        if len(word) >= 2 and any(c.isdigit() for c in word):
            yield word


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, str):
        text = value.strip()
        if 2 <= len(text) <= _MAX_VALUE:
            yield text
    elif isinstance(value, int | float):
        text = str(value)
        if len(text) >= 2:
            yield text
    elif isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)


def identifiers(replaced: Sequence[Message]) -> list[str]:
    """The identifiers the user gave in ``replaced``, in order of first appearance."""
    found: dict[str, str] = {}
    for message in replaced:
        if isinstance(message, UserMessage):
            words: Iterator[str] = _user_words(message.content)
        elif isinstance(message, AssistantMessage):
            words = (leaf for c in message.tool_calls for leaf in _arguments(c.arguments))
        else:
            continue
        for word in words:
            found.setdefault(word.casefold(), word)
    return list(found.values())


def _arguments(text: str) -> Iterator[str]:
    try:
        data = json.loads(text)
    except ValueError:
        return iter(())
    return _leaves(data)


async def check_summary(
    summary: str,
    replaced: Sequence[Message],
    replaced_chars: int,
    declared: Sequence[SummaryCheck],
) -> Verdict | None:
    """``None`` when ``summary`` may stand for ``replaced``; otherwise why not."""
    if not summary.strip():
        return Verdict("empty", "the summariser answered with no text")
    if len(summary) > replaced_chars:
        return Verdict(
            "longer_than_replaced",
            f"the summary has {len(summary)} characters, more than the {replaced_chars} it "
            "would replace",
        )
    folded = summary.casefold()
    missing = [word for word in identifiers(replaced) if word.casefold() not in folded]
    if missing:
        shown = ", ".join(repr(w) for w in missing[:_SHOWN])
        more = f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""
        return Verdict(
            "identifier_missing",
            f"the summary leaves out {len(missing)} identifier(s) the user gave: {shown}{more}",
        )
    for check in declared:
        verdict = check.check(summary, replaced)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is not None:
            return Verdict(f"check:{check.name}", str(verdict))
    return None
