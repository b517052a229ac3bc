"""The console's lists, filtered and paged: pure functions from a page's query to what it shows.

Every list page (sessions, tasks, approvals) takes the same query: its own filters (each a
name from a fixed set, its value one of the choices the page offers) and ``page`` (1, 2, ...;
:data:`PER_PAGE` rows each, newest first). A query the page does not take is refused with a
sentence naming what it does take (:class:`BadQuery`), never silently ignored. The filter form
and the links to the newer and older pages keep the other filters as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from typing import TypeVar
from urllib.parse import urlencode

from ankka._kernel.errors import RequestError

__all__ = ["MAX_PAGE", "PER_PAGE", "BadQuery", "Filter", "Listing", "listing", "when"]

PER_PAGE = 50
MAX_PAGE = 1000
T = TypeVar("T")


class BadQuery(RequestError):
    """A list page's query it does not take; the message says what it does."""


@dataclass(frozen=True, slots=True)
class Filter:
    """One of a page's filters: its query name, its label, the values it takes."""

    name: str
    label: str
    choices: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Listing:
    """A list page's query, checked: the filters set (name → value) and the page asked for."""

    path: str
    filters: tuple[Filter, ...]
    chosen: Mapping[str, str] = field(default_factory=dict)
    page: int = 1

    def keeps(self, **values: str | None) -> bool:
        """Whether a row with these values passes every filter set."""
        return all(values.get(name) == value for name, value in self.chosen.items())

    def window(self, rows: Sequence[T]) -> tuple[list[T], bool]:
        """This page's rows of ``rows`` (every row that passed, newest first), and whether
        there are older ones."""
        start = (self.page - 1) * PER_PAGE
        return list(rows[start : start + PER_PAGE]), len(rows) > start + PER_PAGE

    def skipped(self) -> int:
        """How many passing rows the pages before this one hold (the query's offset)."""
        return (self.page - 1) * PER_PAGE

    def cut(self, rows: Sequence[T]) -> tuple[list[T], bool]:
        """This page's rows of ``rows`` read from :meth:`skipped` on (at most
        ``PER_PAGE + 1`` of them), and whether there are older ones."""
        return list(rows[:PER_PAGE]), len(rows) > PER_PAGE

    def wanted(self) -> int:
        """How many passing rows cover this page and tell whether there is another."""
        return self.page * PER_PAGE + 1

    def link(self, page: int) -> str:
        query = {**self.chosen, **({"page": str(page)} if page > 1 else {})}
        return f"{self.path}?{urlencode(query)}" if query else self.path

    def form(self) -> str:
        """The filter form (a GET of this page; "any" leaves a filter unset)."""
        selects = "".join(
            f'<label>{escape(f.label)} <select name="{escape(f.name)}">'
            '<option value="">any</option>'
            + "".join(
                f'<option value="{escape(c)}"'
                f"{' selected' if self.chosen.get(f.name) == c else ''}>{escape(c)}</option>"
                for c in f.choices
            )
            + "</select></label> "
            for f in self.filters
        )
        return (
            f'<form class="filters" method="get" action="{escape(self.path)}">{selects}'
            '<button type="submit">show</button></form>'
        )

    def pager(self, *, more: bool, shown: int) -> str:
        """Where this page stands and the links to the newer and older pages."""
        if shown == 0 and self.page == 1:
            return ""
        first = (self.page - 1) * PER_PAGE + 1
        where = f'<span id="range">{first}-{first + shown - 1}</span>' if shown else "nothing here"
        newer = (
            f'<a rel="prev" href="{escape(self.link(self.page - 1))}">newer</a> '
            if self.page > 1
            else ""
        )
        older = f'<a rel="next" href="{escape(self.link(self.page + 1))}">older</a>' if more else ""
        return f'<p class="pager" data-page="{self.page}">{newer}{where} {older}</p>'


def listing(path: str, query: Mapping[str, str], filters: Sequence[Filter]) -> Listing:
    """``query`` checked against ``filters`` and ``page``; raises :class:`BadQuery`."""
    known = {f.name: f for f in filters}
    chosen: dict[str, str] = {}
    page = 1
    for name, value in query.items():
        if name == "page":
            if not value.isdigit() or not 1 <= int(value) <= MAX_PAGE:
                raise BadQuery(f"?page= is a whole number from 1 to {MAX_PAGE}, not {value[:40]!r}")
            page = int(value)
            continue
        found = known.get(name)
        if found is None:
            takes = ", ".join(f"?{n}=" for n in (*known, "page"))
            raise BadQuery(f"this page takes {takes}; not ?{name[:40]}=")
        if value == "":
            continue  # "any", as the form sends it
        if value not in found.choices:
            choices = ", ".join(found.choices) or "nothing yet"
            raise BadQuery(f"?{name}= is one of {choices}; not {value[:40]!r}")
        chosen[name] = value
    return Listing(path, tuple(filters), chosen, page)


def when(moment: datetime | None) -> str:
    """A time as the console shows it: UTC to the second, machine-readable in ``datetime``."""
    if moment is None:
        return "-"
    shown = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f'<time datetime="{escape(moment.isoformat())}">{shown}</time>'
