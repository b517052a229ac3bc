"""Guardrails: checks on text that pass it or refuse the turn with a reason.

A guardrail is a function of the text that returns ``None`` to pass or a reason (a string)
to refuse. Input guardrails see the user's message before any model is called; output
guardrails see the final answer before memory is written. They run in declared order and the
first refusal stops the rest, so put cheap ones first.

On a stream-shaped agent the output guardrails run after the tokens were delivered: they keep
a refused answer out of memory but cannot take back what the reader saw.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import overload

from ankka._kernel.errors import Refused

__all__ = ["Guardrail", "first_refusal", "guardrail"]

Check = Callable[[str], "str | Awaitable[str | None] | None"]


@dataclass(frozen=True, slots=True)
class Guardrail:
    name: str
    check: Check


@overload
def guardrail(function: Check, /) -> Guardrail: ...


@overload
def guardrail(*, name: str | None = None) -> Callable[[Check], Guardrail]: ...


def guardrail(
    function: Check | None = None, /, *, name: str | None = None
) -> Guardrail | Callable[[Check], Guardrail]:
    """Declare a guardrail from a function ``(text) -> reason | None``."""

    def build(fn: Check) -> Guardrail:
        return Guardrail(name or str(getattr(fn, "__name__", "guardrail")), fn)

    if function is not None:
        return build(function)
    return build


async def first_refusal(guardrails: Sequence[Guardrail], text: str, *, stage: str) -> None:
    """Run ``guardrails`` in order; raise :class:`Refused` at the first that refuses."""
    for rail in guardrails:
        verdict = rail.check(text)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is not None:
            raise Refused(str(verdict), by=f"{stage} guardrail {rail.name!r}")
