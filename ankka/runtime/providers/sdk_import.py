"""A model SDK imported on a worker thread, at its provider's first call.

``openai`` and ``anthropic`` take about half a second each to import, which ``ankka serve`` no
longer spends before it listens (docs/benchmarks.md). Imported where the first call is made,
on the event loop's thread, they would stop every other session, stream and health check for
that half second; on a worker thread the loop goes on meanwhile (the import still takes its
time, and the interpreter's lock is shared, so the other work goes slower, not stopped).
"""

from __future__ import annotations

import asyncio
import importlib

__all__ = ["import_off_loop"]


async def import_off_loop(module: str) -> None:
    """Import ``module`` on a worker thread (a lookup once it is imported; a caller that
    comes while another thread imports it waits there, not on the loop)."""
    await asyncio.to_thread(importlib.import_module, module)
