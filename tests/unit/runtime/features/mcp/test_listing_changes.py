"""A listing that changes is journaled as its changes; what a listing leaves out and why.

The records are pure values (:mod:`ankka.runtime.records.mcp`); :class:`Compiler` is what
``McpServers`` uses to make a refreshed listing ready and to say what a turn records.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry

from ankka.runtime.features.mcp.compiled import KEPT_LISTINGS, Compiler
from ankka.runtime.features.mcp.connection import Listed
from ankka.runtime.features.mcp.listing import MAX_SCHEMA, listed
from ankka.runtime.features.mcp.metrics import McpMetrics
from ankka.runtime.records import registry as events
from ankka.runtime.records.mcp import (
    ListedTool,
    McpToolsChanged,
    McpToolsRecord,
    ToolListing,
    changes,
    listing_in,
)

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"q": {"type": "string"}}}


def _raw(name: str, description: str = "d", schema: Any = None) -> SimpleNamespace:
    return SimpleNamespace(name=name, description=description, input_schema=schema or SCHEMA)


def _listing(*described: tuple[str, str]) -> ToolListing:
    return ToolListing("s", tuple(ListedTool(n, d, SCHEMA) for n, d in described))


def test_a_change_record_is_stored_under_its_own_kind_and_round_trips() -> None:
    record = McpToolsChanged(
        "a", "t2", "s", "sha256:new", "sha256:old", ("x", "y"), (ListedTool("y", "Y", SCHEMA),)
    )
    kind, body = events.encode(record)
    assert kind == "mcp_tools_changed"
    assert body == (
        '{"agent":"a","turn":"t2","server":"s","digest":"sha256:new","base":"sha256:old",'
        '"names":["x","y"],"put":[{"name":"y","description":"Y","input_schema":{"type":'
        '"object","properties":{"q":{"type":"string"}}}}]}'
    )
    assert events.decode(kind, body) == record


def test_the_old_records_are_stored_and_read_as_they_always_were() -> None:
    stored = ("mcp_tools", '{"agent":"a","turn":"t1","server":"s","digest":"sha256:ab"}')
    assert events.decode(*stored) == McpToolsRecord("a", "t1", "s", "sha256:ab")
    assert events.encode(McpToolsRecord("a", "t1", "s", "sha256:ab")) == stored


def test_changes_carry_only_what_changed_and_rebuild_the_listing_in_order() -> None:
    old = _listing(("a", "1"), ("b", "2"), ("c", "3"))
    new = _listing(("c", "3"), ("a", "changed"), ("d", "4"))
    names, put = changes(old, new)
    assert names == ("c", "a", "d")
    assert [t.name for t in put] == ["a", "d"]  # b is gone by not being named; c is as it was
    record = McpToolsChanged("x", "t", "s", new.digest, old.digest, names, put)
    assert record.apply(old) == new and record.apply(old).digest == new.digest


def test_a_sessions_records_fold_back_into_every_listing_they_name() -> None:
    first = _listing(("a", "1"), ("b", "2"))
    second = _listing(("a", "1"), ("b", "two"))
    third = _listing(("b", "two"), ("c", "3"))
    records = [
        McpToolsRecord("x", "t1", "s", first.digest, first.tools),
        McpToolsRecord("x", "t2", "s", first.digest),
        McpToolsChanged("x", "t3", "s", second.digest, first.digest, *changes(first, second)),
        McpToolsRecord("x", "t4", "other", "sha256:elsewhere"),
        McpToolsChanged("x", "t5", "s", third.digest, second.digest, *changes(second, third)),
    ]
    assert listing_in(records, "s", first.digest) == first
    assert listing_in(records, "s", second.digest) == second
    assert listing_in(records, "s", third.digest) == third
    assert listing_in(records, "s", "sha256:never") is None
    # A change whose base is not the listing folded so far rebuilds nothing.
    assert listing_in(records[2:], "s", second.digest) is None


def test_a_name_listed_twice_and_an_oversized_schema_are_left_out_with_reasons() -> None:
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(2000)}}
    listing, problems = listed(
        "s", [_raw("dup"), _raw("ok"), _raw("dup", "another"), _raw("big", schema=huge)]
    )
    assert [t.name for t in listing.tools] == ["ok"]
    assert "2 tools of this name" in problems["'dup'"]
    assert f"past {MAX_SCHEMA} characters" in problems["'big'"]


def _compiler() -> tuple[Compiler, CollectorRegistry]:
    registry = CollectorRegistry()
    return Compiler(McpMetrics(registry)), registry


def test_a_turn_records_the_digest_alone_its_changes_or_the_whole_listing() -> None:
    compiler, _ = _compiler()
    tools = [_raw(f"t{i}", f"tool {i}") for i in range(10)]
    first = compiler.compile("s", Listed(tools, {})).listing
    whole = compiler.record("a", "t1", first, None)
    assert isinstance(whole, McpToolsRecord) and whole.tools == first.tools
    same = compiler.record("a", "t2", first, first.digest)
    assert same == McpToolsRecord("a", "t2", "s", first.digest)

    tools[3] = _raw("t3", "tool three, changed")
    second = compiler.compile("s", Listed(tools, {})).listing
    changed = compiler.record("a", "t3", second, first.digest)
    assert isinstance(changed, McpToolsChanged)
    assert [t.name for t in changed.put] == ["t3"] and changed.apply(first) == second
    # A session whose last listing this process no longer holds is given the whole one.
    unknown = compiler.record("a", "t4", second, "sha256:from-another-process")
    assert isinstance(unknown, McpToolsRecord) and unknown.tools == second.tools


def test_mostly_new_listings_are_recorded_whole_and_old_bases_are_let_go() -> None:
    compiler, _ = _compiler()
    first = compiler.compile("s", Listed([_raw("a"), _raw("b")], {})).listing
    second = compiler.compile("s", Listed([_raw("a", "new"), _raw("b", "new")], {})).listing
    assert isinstance(compiler.record("x", "t", second, first.digest), McpToolsRecord)
    for n in range(KEPT_LISTINGS):
        compiler.compile("s", Listed([_raw(f"n{n}"), _raw("a"), _raw("b")], {}))
    later = compiler.compile("s", Listed([_raw("a")], {})).listing
    assert isinstance(compiler.record("x", "t", later, first.digest), McpToolsRecord)


def test_what_a_listing_leaves_out_is_counted_once_per_listing_that_differs() -> None:
    compiler, registry = _compiler()
    bad = {"type": "object", "properties": {"q": {"type": 5}}}
    raw = Listed([_raw("ok"), _raw("odd", schema=bad)], {"'refused'": "the protocol refuses it"})
    for _ in range(3):  # three refreshes of one listing
        compiled = compiler.compile("s", raw)
    assert [t.name for t in compiled.listing.tools] == ["ok"]
    assert set(compiled.left_out) == {"'odd'", "'refused'"}
    assert "input schema is invalid" in compiled.left_out["'odd'"]
    counted = registry.get_sample_value("ankka_mcp_tools_left_out_total", {"server": "s"})
    assert counted == 2.0
