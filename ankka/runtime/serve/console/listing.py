"""The console's lists, filtered and paged: pure functions from a page's query to what it shows.

Every list page (sessions, tasks, approvals) takes the same query: its own filters (each a
name from a fixed set, its value one of the choices the page offers) and ``cursor`` (the
store's opaque cursor, :func:`~ankka.runtime.store.readable.encode_cursor`, of the last row
of the page before; :data:`PER_PAGE` rows a page, newest first). A query the page does not
take, or a cursor this runtime did not give, is refused with a sentence naming what it does
take (:class:`BadQuery`), never silently ignored. The filter form and the links to the
newest and the next older page keep the filters as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from typing import TypeVar
from urllib.parse import urlencode

from ankka._kernel.errors import RequestError
from ankka.runtime.store.readable import BadCursor, Cursor, decode_cursor, encode_cursor

__all__ = ["PER_PAGE", "BadQuery", "Filter", "Listing", "listing", "when"]

PER_PAGE = 50
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
    """A list page's query, checked: the filters set (name → value) and where the page
    starts (``after``: the key of the previous page's last row; None: the newest page)."""

    path: str
    filters: tuple[Filter, ...]
    chosen: Mapping[str, str] = field(default_factory=dict)
    after: Cursor | None = None

    def keeps(self, **values: str | None) -> bool:
        """Whether a row with these values passes every filter set."""
        return all(values.get(name) == value for name, value in self.chosen.items())

    def cut(self, rows: Sequence[T], key: Callable[[T], Cursor]) -> tuple[list[T], str | None]:
        """This page's rows of ``rows`` (at most ``PER_PAGE + 1`` read from :attr:`after`
        on), and the cursor of the page after (None: this is the last)."""
        shown = list(rows[:PER_PAGE])
        return shown, encode_cursor(key(shown[-1])) if len(rows) > PER_PAGE else None

    def link(self, cursor: str | None) -> str:
        query = {**self.chosen, **({"cursor": cursor} if cursor else {})}
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

    def pager(self, *, cursor: str | None, shown: int) -> str:
        """How many rows this page shows, a link back to the newest page (when this is not
        it) and one to the next older page (``cursor``: its cursor; None: none)."""
        if shown == 0 and self.after is None:
            return ""
        where = f'<span id="shown">{shown} shown</span>' if shown else "nothing here"
        newest = (
            f'<a rel="first" href="{escape(self.link(None))}">newest</a> '
            if self.after is not None
            else ""
        )
        older = f'<a rel="next" href="{escape(self.link(cursor))}">older</a>' if cursor else ""
        return f'<p class="pager">{newest}{where} {older}</p>'


def _cursor(text: str) -> Cursor:
    """The key ``?cursor=`` names: the store's cursor, its first part a time."""
    refused = BadQuery(
        f"?cursor= is not a cursor this console gave ({text[:40]!r}): follow the page's own "
        "'older' link, or leave ?cursor= out for the newest page"
    )
    try:
        key = decode_cursor(text)
        datetime.fromisoformat(key[0])
    except (BadCursor, ValueError) as exc:
        raise refused from exc
    return key


def listing(path: str, query: Mapping[str, str], filters: Sequence[Filter]) -> Listing:
    """``query`` checked against ``filters`` and ``cursor``; raises :class:`BadQuery`."""
    known = {f.name: f for f in filters}
    chosen: dict[str, str] = {}
    after: Cursor | None = None
    for name, value in query.items():
        if name == "cursor":
            after = _cursor(value)
            continue
        found = known.get(name)
        if found is None:
            takes = ", ".join(f"?{n}=" for n in (*known, "cursor"))
            raise BadQuery(f"this page takes {takes}; not ?{name[:40]}=")
        if value == "":
            continue  # "any", as the form sends it
        if value not in found.choices:
            choices = ", ".join(found.choices) or "nothing yet"
            raise BadQuery(f"?{name}= is one of {choices}; not {value[:40]!r}")
        chosen[name] = value
    return Listing(path, tuple(filters), chosen, after)


def when(moment: datetime | None) -> str:
    """A time as the console shows it: UTC to the second, machine-readable in ``datetime``."""
    if moment is None:
        return "-"
    shown = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f'<time datetime="{escape(moment.isoformat())}">{shown}</time>'
