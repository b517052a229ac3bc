"""Compaction settings a service declares: :class:`Compaction`, :class:`SummaryCheck` (see
:mod:`ankka.runtime.declare.compaction`; the consumer is
:mod:`ankka.runtime.features.compaction`).

A public module: the path users import (README, examples, docs). It re-exports from the rooms
below ``ankka.runtime`` and nothing inside the rooms imports it (.importlinter: the runtime's
layers).
"""

from ankka.runtime.declare.compaction import Compaction, SummaryCheck

__all__ = ["Compaction", "SummaryCheck"]
