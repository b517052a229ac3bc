"""Test doubles for users' own tests: the scripted provider, the scripted judgment provider
and a clock moved by hand (see :mod:`ankka.runtime.providers.scripted`).

A public module: the path users import (README, examples, docs). It re-exports from the rooms below
``ankka.runtime`` and nothing inside the rooms imports it (.importlinter: the runtime's layers).
"""

from ankka.runtime.providers.scripted import (
    REASONING_WIRE,
    ManualClock,
    ScriptedJudgmentProvider,
    ScriptedProvider,
    ScriptExhausted,
)

__all__ = [
    "REASONING_WIRE",
    "ManualClock",
    "ScriptExhausted",
    "ScriptedJudgmentProvider",
    "ScriptedProvider",
]
