"""The console's lists: a page's query checked (its cursor too), rows cut to a page, links that
keep the filters (ankka/runtime/serve/console/listing.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from ankka.runtime.serve.console.listing import PER_PAGE, BadQuery, Filter, listing, when
from ankka.runtime.store.readable import encode_cursor

FILTERS = (Filter("agent", "agent", ("refunds", "weather")), Filter("state", "state", ("waiting",)))


def test_a_query_is_taken_only_as_the_page_offers_it() -> None:
    key = (datetime(2026, 12, 2, tzinfo=UTC).isoformat(), "s-1")
    asked = listing(
        "/console", {"agent": "weather", "cursor": encode_cursor(key), "state": ""}, FILTERS
    )
    assert asked.chosen == {"agent": "weather"}  # "any" leaves a filter unset
    assert asked.after == key
    not_a_time = encode_cursor(("yesterday", "s-1"))
    for query, said in (
        ({"agent": "nobody"}, "?agent= is one of refunds, weather; not 'nobody'"),
        ({"cursor": "x"}, "?cursor= is not a cursor this console gave ('x')"),
        ({"cursor": not_a_time}, "?cursor= is not a cursor this console gave"),
        ({"page": "2"}, "this page takes ?agent=, ?state=, ?cursor=; not ?page="),
    ):
        with pytest.raises(BadQuery) as refused:
            listing("/console", query, FILTERS)
        assert str(refused.value).startswith(said)


def test_rows_are_cut_to_a_page_and_the_links_keep_the_filters() -> None:
    rows = [(f"2026-12-02T00:00:{n:02}+00:00", f"s-{n}") for n in range(PER_PAGE + 1)]
    first = listing("/console", {"agent": "weather"}, FILTERS)
    shown, cursor = first.cut(rows, lambda r: r)
    assert shown == rows[:PER_PAGE] and cursor == encode_cursor(rows[PER_PAGE - 1])
    pager = first.pager(cursor=cursor, shown=len(shown))
    assert 'rel="first"' not in pager  # this is the newest page
    assert f'<a rel="next" href="/console?agent=weather&amp;cursor={cursor}">older</a>' in pager
    assert f'<span id="shown">{PER_PAGE} shown</span>' in pager
    last = listing("/console", {"agent": "weather", "cursor": cursor}, FILTERS)
    shown, after = last.cut(rows[PER_PAGE:], lambda r: r)
    assert shown == [rows[-1]] and after is None
    pager = last.pager(cursor=after, shown=len(shown))
    assert '<a rel="first" href="/console?agent=weather">newest</a>' in pager
    assert 'rel="next"' not in pager
    assert listing("/console", {}, FILTERS).pager(cursor=None, shown=0) == ""


def test_the_form_shows_what_is_chosen_and_keeps_passes_only_matching_rows() -> None:
    asked = listing("/console", {"state": "waiting"}, FILTERS)
    form = asked.form()
    assert '<form class="filters" method="get" action="/console">' in form
    assert '<option value="waiting" selected>waiting</option>' in form
    assert '<option value="weather">weather</option>' in form
    assert asked.keeps(state="waiting", agent="refunds")
    assert not asked.keeps(state=None, agent="refunds")


def test_a_time_is_shown_in_utc_and_kept_exact_for_machines() -> None:
    helsinki = timezone(timedelta(hours=2))
    moment = datetime(2026, 12, 2, 3, 4, 5, 678000, tzinfo=helsinki)
    assert when(moment) == (
        '<time datetime="2026-12-02T03:04:05.678000+02:00">2026-12-02 01:04:05 UTC</time>'
    )
    assert when(None) == "-"
    assert "UTC" in when(datetime.now(UTC))
