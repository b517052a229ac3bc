"""Guardrails: checks on text that pass it or refuse the turn with a reason.

A guardrail is a function of the text that returns ``None`` to pass or a reason (a string)
to refuse. Input guardrails see the user's message before any model is called; output
guardrails see the final answer before memory is written. They run in declared order and the
first refusal stops the rest, so put cheap ones first.

A judged guardrail (:class:`~ankka.runtime.declare.judgments.guardrail.JudgedGuardrail`) asks a
question of the service's judgment provider instead; :func:`first_refusal` is the one function
every loop runs guardrails through, and it hands judged guardrails the turn's
:class:`~ankka.runtime.declare.judgments.guardrail.Judging`. A judged guardrail that cannot decide
raises; it never refuses or passes in its provider's place.

On a stream-shaped agent the output guardrails run after the tokens were delivered: they keep
a refused answer out of memory but cannot take back what the reader saw.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias, overload

from ankka._kernel.errors import Refused
from ankka.runtime.declare.judgments.guardrail import JudgedGuardrail, Judging, decide

__all__ = ["AnyGuardrail", "Guardrail", "first_refusal", "guardrail"]

Check = Callable[[str], "str | Awaitable[str | None] | None"]


@dataclass(frozen=True, slots=True)
class Guardrail:
    name: str
    check: Check


AnyGuardrail: TypeAlias = Guardrail | JudgedGuardrail


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


async def first_refusal(
    guardrails: Sequence[AnyGuardrail], text: str, *, stage: str, judging: Judging | None = None
) -> None:
    """Run ``guardrails`` in order; raise :class:`Refused` at the first that refuses."""
    for rail in guardrails:
        if isinstance(rail, JudgedGuardrail):
            verdict: object = await decide(rail, text, judging)
        else:
            verdict = rail.check(text)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is not None:
            raise Refused(str(verdict), by=f"{stage} guardrail {rail.name!r}")
