"""Small inline SVG charts, rendered on the server: pure functions of their numbers.

Used by :mod:`ankka.runtime.serve.console.pages`. Every label is escaped; the SVG carries a
``<title>`` and a ``data-`` attribute per bar so a reader (or a test) can check the figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["Bar", "budget_bar", "stacked_bars"]

_WIDTH, _HEIGHT, _PAD = 480, 140, 24


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: its label (a turn's number) and its stacked parts, in ``series`` order."""

    label: str
    values: tuple[int, ...]


def stacked_bars(
    bars: Sequence[Bar], *, series: Sequence[str], colours: Sequence[str], title: str
) -> str:
    """Bars of stacked values (e.g. input and output tokens per turn), scaled to the tallest."""
    if not bars:
        return f'<p class="empty">{escape(title)}: nothing yet</p>'
    tallest = max(sum(b.values) for b in bars) or 1
    slot = (_WIDTH - 2 * _PAD) / len(bars)
    width = max(min(slot * 0.7, 40.0), 2.0)
    usable = _HEIGHT - 2 * _PAD
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {_WIDTH} {_HEIGHT}" width="{_WIDTH}" '
        f'height="{_HEIGHT}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
        f'<text x="{_PAD}" y="14" class="axis">{tallest}</text>',
        f'<line x1="{_PAD}" y1="{_HEIGHT - _PAD}" x2="{_WIDTH - _PAD}" '
        f'y2="{_HEIGHT - _PAD}" stroke="#888"/>',
    ]
    for i, bar in enumerate(bars):
        x = _PAD + i * slot + (slot - width) / 2
        y = float(_HEIGHT - _PAD)
        total = sum(bar.values)
        parts.append(f'<g class="bar" data-label="{escape(bar.label)}" data-total="{total}">')
        for name, value, colour in zip(series, bar.values, colours, strict=True):
            h = usable * value / tallest
            y -= h
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{h:.1f}" '
                f'fill="{colour}"><title>{escape(bar.label)}: {value} {escape(name)}</title></rect>'
            )
        parts.append(
            f'<text x="{x + width / 2:.1f}" y="{_HEIGHT - 8}" text-anchor="middle" '
            f'class="axis">{escape(bar.label)}</text></g>'
        )
    legend = " ".join(
        f'<tspan fill="{c}">■</tspan> {escape(n)}' for n, c in zip(series, colours, strict=True)
    )
    parts.append(f'<text x="{_WIDTH - _PAD}" y="14" text-anchor="end" class="axis">{legend}</text>')
    parts.append("</svg>")
    return "".join(parts)


def budget_bar(used: int, budget: int, *, title: str) -> str:
    """How much of a budget is used (a task's iterations): a filled bar over the whole."""
    budget = max(budget, 1)
    share = min(max(used, 0) / budget, 1.0)
    width = _WIDTH - 2 * _PAD
    colour = "#c0392b" if used >= budget else "#4a7bd0"
    return (
        f'<svg class="chart budget" role="img" viewBox="0 0 {_WIDTH} 36" width="{_WIDTH}" '
        f'height="36" data-used="{used}" data-budget="{budget}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'
        f'<rect x="{_PAD}" y="6" width="{width}" height="14" fill="#eee" stroke="#bbb"/>'
        f'<rect x="{_PAD}" y="6" width="{width * share:.1f}" height="14" fill="{colour}"/>'
        f'<text x="{_PAD}" y="32" class="axis">{used} of {budget} iterations</text></svg>'
    )
