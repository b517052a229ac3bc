"""A compaction as a span of its own (docs/observability.md), when tracing is on.

``ankka.compaction`` (INTERNAL) covers one compaction from the summariser's call to its verdict
in the journal, the summariser's call a ``chat`` span inside it. Its parent is the context of
the commit that queued the session (:meth:`~.consumer.Compactor.committed`): the turn, or the
task iteration, whose growth made the summary due. No summary text, ever: sizes, the outcome
and the tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ankka._kernel import genai
from ankka.runtime.records.compaction import CompactionRecord, HistoryCompacted

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from ankka.runtime.engine.spans import EngineSpans

__all__ = ["compaction_ended", "compaction_span"]


@contextmanager
def compaction_span(spans: EngineSpans | None, session: str, chars: int) -> Iterator[Span | None]:
    """The compaction's span, current inside (None when tracing is off)."""
    if spans is None:
        yield None
        return
    attributes: dict[str, str | int | bool | list[str]] = {
        genai.CONVERSATION_ID: session,
        "ankka.compaction.replaced_chars": chars,
    }
    with spans.span("ankka.compaction", attributes) as span:
        yield span


def compaction_ended(span: Span, record: CompactionRecord | None) -> None:
    """What the compaction came to: ``compacted``, ``rejected`` (with its reason) or
    ``superseded`` (another compaction landed since the cut)."""
    if record is None:
        span.set_attribute("ankka.compaction.outcome", "superseded")
        return
    usage = record.usage
    found: dict[str, str | int] = {
        genai.REQUEST_MODEL: record.model,
        genai.INPUT_TOKENS: usage.input_tokens,
        genai.OUTPUT_TOKENS: usage.output_tokens,
        "ankka.compaction.through": record.through,
    }
    if isinstance(record, HistoryCompacted):
        found["ankka.compaction.outcome"] = "compacted"
        found["ankka.compaction.chars_after"] = record.chars_after
    else:
        found["ankka.compaction.outcome"] = "rejected"
        found["ankka.compaction.reason"] = record.reason
    span.set_attributes(found)  # in one call: the SDK's cost is per call
