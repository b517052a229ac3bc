"""Guardrails: :func:`guardrail` and :class:`Guardrail` (see
:mod:`ankka.runtime.declare.guardrails`).

A public module: the path users import (README, examples, docs). It re-exports from the rooms below
``ankka.runtime`` and nothing inside the rooms imports it (.importlinter: the runtime's layers).
"""

from ankka.runtime.declare.guardrails import AnyGuardrail, Guardrail, first_refusal, guardrail

__all__ = ["AnyGuardrail", "Guardrail", "first_refusal", "guardrail"]
