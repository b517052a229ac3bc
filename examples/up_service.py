"""What ``ankka up`` serves by default: the weather agent, a tool-less chat agent and the
researcher (an autonomous agent), in one service.

The service ships in the package (:mod:`ankka.local.demo`), so ``ankka up`` works outside the
clone too; this module keeps ``ankka serve examples.up_service:service`` working. The weather
agent and the researcher are the ones ``examples/weather.py`` and ``examples/tasks.py``
spell out; ``examples/up-standin.json`` (the same file as the package's ``standin.json``)
scripts the stand-in for the README's question, then for one task.
"""

from __future__ import annotations

from ankka.local.demo import service

__all__ = ["service"]
