"""The console's lists: a page's query checked, filtered rows paged, links that keep the
filters (ankka/runtime/serve/console/listing.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from ankka.runtime.serve.console.listing import PER_PAGE, BadQuery, Filter, listing, when

FILTERS = (Filter("agent", "agent", ("refunds", "weather")), Filter("state", "state", ("waiting",)))


def test_a_query_is_taken_only_as_the_page_offers_it() -> None:
    asked = listing("/console", {"agent": "weather", "page": "3", "state": ""}, FILTERS)
    assert asked.chosen == {"agent": "weather"}  # "any" leaves a filter unset
    assert asked.page == 3
    for query, said in (
        ({"agent": "nobody"}, "?agent= is one of refunds, weather; not 'nobody'"),
        ({"page": "0"}, "?page= is a whole number from 1 to 1000, not '0'"),
        ({"page": "x"}, "?page= is a whole number from 1 to 1000, not 'x'"),
        ({"colour": "red"}, "this page takes ?agent=, ?state=, ?page=; not ?colour="),
    ):
        with pytest.raises(BadQuery) as refused:
            listing("/console", query, FILTERS)
        assert str(refused.value) == said


def test_rows_are_paged_and_the_links_keep_the_filters() -> None:
    rows = list(range(PER_PAGE * 2 + 1))
    first = listing("/console", {"agent": "weather"}, FILTERS)
    shown, more = first.window(rows)
    assert shown == rows[:PER_PAGE] and more
    pager = first.pager(more=more, shown=len(shown))
    assert 'rel="prev"' not in pager
    assert '<a rel="next" href="/console?agent=weather&amp;page=2">older</a>' in pager
    assert f'<span id="range">1-{PER_PAGE}</span>' in pager
    last = listing("/console", {"agent": "weather", "page": "3"}, FILTERS)
    shown, more = last.window(rows)
    assert shown == [rows[-1]] and not more
    pager = last.pager(more=more, shown=len(shown))
    assert '<a rel="prev" href="/console?agent=weather&amp;page=2">newer</a>' in pager
    assert 'rel="next"' not in pager
    assert first.wanted() == PER_PAGE + 1  # enough to know whether there is a next page


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
