"""The journal's decoder (orjson, with ``json`` where orjson refuses) against the path it
replaced (``json.loads``, the renamed fields, ``from_dict``): the same records, the same folds,
the same errors, over every record kind and over JSON that only ``json`` accepts."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ankka.runtime.engine.session import SessionCache, SessionState
from ankka.runtime.engine.view import SentView
from ankka.runtime.records import registry as events
from ankka.runtime.records.accounting import UnwrittenCalls
from ankka.runtime.records.approvals import (
    ApprovalDecided,
    ApprovalRequest,
    ApprovedCallStarted,
    ElicitationAnswered,
    ResumedCall,
    TurnEnded,
    TurnSuspended,
)
from ankka.runtime.records.conversations import (
    ConversationCutOff,
    ConversationEnded,
    ConversationResumed,
    TurnSkipped,
)
from ankka.runtime.records.fold import fold
from ankka.runtime.records.iterations import IterationCompleted, IterationStarted
from ankka.runtime.records.judgments import JudgmentUsage
from ankka.runtime.records.mcp import ListedTool, McpToolsChanged, McpToolsRecord, SampledCall
from ankka.runtime.records.messages import (
    AssistantMessage,
    ModelCall,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from ankka.runtime.records.session import SessionOpened
from ankka.runtime.store.journal import Journal
from tests.support.stores import journal_store
from tests.unit.runtime.store.test_journal import (
    COMPACTED,
    REJECTED,
    TURN,
    OpenJournal,
    open_journal,
)

__all__ = ["open_journal"]  # the SQLite and PostgreSQL stores, from the journal's suite

AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
CALL = ModelCall("p", "m", "a", 12.125, Usage(30, 4, 2, 1))
REQUEST = ApprovalRequest("ap1", "c9", "delete", '{"id": 7}', "d" * 64, AT)
SUSPENDED = TurnSuspended(
    "t3",
    "a",
    "delete it",
    (
        UserMessage("delete it", "a", "t3"),
        AssistantMessage(None, (ToolCall("c9", "delete", '{"id": 7}'),), "a", "t3", CALL),
    ),
    (REQUEST, ApprovalRequest("ap2", "c10", "delete", "{}", "e" * 64, None)),
)
RESUMED = ToolResult("c9", "delete", "deleted", False, "a", "t3")

# Every kind of record, in an order a session could hold them: a turn, a compaction and a
# rejected one, a suspended turn, its decisions and resumption, accounting, judged
# guardrails' tokens, MCP listings and a task iteration's marks.
EVERY_KIND: tuple[events.Record, ...] = (
    SessionOpened("user:alice", "a"),
    SessionOpened("user:bob"),
    McpToolsRecord(
        "a",
        "t1",
        "files",
        "f" * 64,
        (ListedTool("read", "Reads a file ✓", {"type": "object", "properties": {}}),),
    ),
    McpToolsRecord("a", "t1", "files", "f" * 64),
    McpToolsChanged(
        "a",
        "t1",
        "files",
        "e" * 64,
        "f" * 64,
        ("read", "write"),
        (ListedTool("write", "Writes a file", {"type": "object", "properties": {}}),),
    ),
    *TURN,
    JudgmentUsage(Usage(11, 1), "a", "t1"),
    COMPACTED,
    REJECTED,
    IterationStarted(1),
    UserMessage("again — ünïcode \u2028 and \x00 control", "a", "t2"),
    IterationCompleted(1, Usage(7, 3)),
    UnwrittenCalls("t2", "a", "turn_failed", (CALL, CALL)),
    SUSPENDED,
    ApprovalDecided("ap1", "t3", "approved", "looks fine", "user:alice", AT),
    ApprovalDecided("ap2", "t3", "refused", "", "user:bob", AT),
    ApprovedCallStarted("ap1", "t3", "c9", "d" * 64),
    RESUMED,
    ResumedCall("t3", CALL),
    AssistantMessage("done", (), "a", "t3", CALL, Usage(60, 8, 4, 2)),
    TurnEnded("t3", "answered", ""),
    ElicitationAnswered(
        "files",
        ApprovalRequest("eli_1", "c11", "mcp__files__write", '{"message":"Sure?"}', "c" * 64, AT),
        ApprovalDecided("eli_1", "t4", "approved", "", "user:alice", AT),
        "accept",
        {"sure": True},
    ),
    SampledCall("t4", "a", "files", CALL),
    TurnSkipped("t5", "writer", "speaker_silent", "no answer within the turn's 30 s"),
    ConversationCutOff("t5", "caller_left"),
    ConversationResumed("t5"),
    ConversationEnded("t5", "moderator", "the editor ended the standup"),
)

_RENDERED = {"call": "model_call", "turn_usage": "usage", "call_id": "tool_call_id"}
_MESSAGE_KINDS = {"user_message", "assistant_message", "tool_result"}


def old_decode(kind: str, body: str) -> events.Record:
    """The decoder before orjson, verbatim: the reference every result is compared with."""
    data: dict[str, Any] = json.loads(body)
    if kind in _MESSAGE_KINDS:
        data = {_RENDERED.get(k, k): v for k, v in data.items()}
    return {t.kind: t for t in events.RECORD_TYPES}[kind].from_dict(data)


def folded(entries: list[events.Entry]) -> dict[str, Any]:
    """Everything the host's fold keeps, as comparable values."""
    state = SessionState(SentView(), {})
    for entry in entries:
        state.add(entry.seq, entry.record)
    return _state(state)


def _state(state: SessionState) -> dict[str, Any]:
    view = state.view
    return {
        "view": {k: getattr(view, k) for k in view.__dataclass_fields__},
        "messages": view.messages,
        "mcp": state.mcp_digests,
        "opened": state.opened,
        "approvals": state.approvals,
    }


def test_every_record_kind_is_in_the_golden_session() -> None:
    assert {type(r) for r in EVERY_KIND} == set(events.RECORD_TYPES)


def test_every_record_kind_decodes_as_the_old_path_did() -> None:
    for record in EVERY_KIND:
        kind, body = events.encode(record)
        assert events.decode(kind, body) == old_decode(kind, body) == record


async def test_a_fold_over_every_record_kind_is_the_old_paths_fold(
    open_journal: OpenJournal,
) -> None:
    async with Journal(await open_journal()) as journal:
        for n in range(3):  # three appends: positions and times as a growing session has
            third = len(EVERY_KIND) // 3
            chunk = EVERY_KIND[n * third : None if n == 2 else (n + 1) * third]
            await journal.append("s", chunk, expected=n * third)
        stored = await journal.store.read("s")
        old = [events.Entry(e.seq, e.at, old_decode(e.kind, e.body)) for e in stored]
        new = await journal.read("s")
        assert new == old and [e.record for e in new] == list(EVERY_KIND)
        assert await journal.conversation("s") == fold(e.record for e in old)
        cold = await SessionCache(journal, 4).load("s")  # the host's fold from nothing
        assert _state(cold) == folded(old)
        assert cold.approvals.current is None and cold.opened == SessionOpened("user:bob")
        assert cold.view.compactions == 1 and cold.view.rejected == 1


_JSON_TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from(["\ud800", "\udfff", "\x00"]))
_JSON = st.recursive(
    st.none()
    | st.booleans()
    # Past 64 bits orjson would read a float: events.loads hands such a body to json.
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | _JSON_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_JSON_TEXT, inner, max_size=4),
    max_leaves=12,
)


def _same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN, and of the same types all the way down."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


@settings(max_examples=300, deadline=None)
@given(value=_JSON, ascii_only=st.booleans())
def test_any_json_decodes_to_what_json_loads_gives(value: Any, ascii_only: bool) -> None:
    try:
        body = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"))
    except ValueError:
        return
    assert _same(events.loads(body), json.loads(body))


@pytest.mark.parametrize(
    "body",
    ['{"n":NaN}', '{"n":-Infinity}', '{"n":1E400}', '"\\ud800"'],
)
def test_what_orjson_refuses_still_decodes_through_json(body: str) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(body)
    assert _same(events.loads(body), json.loads(body))


def test_an_mcp_listing_keeps_an_integer_past_64_bits_exact() -> None:
    schema = {"type": "integer", "maximum": 2**64, "minimum": -(2**63) - 1}
    record = McpToolsRecord("a", "t", "s", "d", (ListedTool("big", "", schema),))
    decoded = events.decode(*events.encode(record))
    assert decoded == record and isinstance(decoded, McpToolsRecord) and decoded.tools
    assert decoded.tools[0].input_schema["maximum"] == 2**64


@pytest.mark.parametrize(
    "body", ["", "{", '{"content": "x",}', "[1] [2]", "{'a': 1}", "\ufeff{}", '{"a":"\x01"}']
)
def test_a_body_that_is_not_json_fails_with_the_error_it_always_did(body: str) -> None:
    with pytest.raises(json.JSONDecodeError) as old:
        json.loads(body)
    with pytest.raises(json.JSONDecodeError) as new:
        events.decode("user_message", body)
    assert str(new.value) == str(old.value)


_TEXT = st.text(st.characters(codec="utf-8"), max_size=40)
_USAGE = st.builds(Usage, *[st.integers(0, 2**40)] * 4)
_CALL = st.builds(ModelCall, _TEXT, _TEXT, _TEXT, st.floats(0, 1e7, allow_nan=False), _USAGE)
_MESSAGES = st.one_of(
    st.builds(UserMessage, _TEXT, _TEXT, _TEXT),
    st.builds(
        AssistantMessage,
        st.none() | _TEXT,
        st.lists(st.builds(ToolCall, _TEXT, _TEXT, _TEXT), max_size=3).map(tuple),
        _TEXT,
        _TEXT,
        st.none() | _CALL,
        st.none() | _USAGE,
    ),
    st.builds(ToolResult, _TEXT, _TEXT, _TEXT, st.booleans(), _TEXT, _TEXT),
)


@settings(max_examples=300, deadline=None)
@given(message=_MESSAGES)
def test_any_message_decodes_as_the_old_path_did(message: events.Record) -> None:
    kind, body = events.encode(message)
    assert events.decode(kind, body) == old_decode(kind, body)


async def test_records_written_before_newer_fields_existed_decode_as_before(
    tmp_path: Path,
) -> None:
    older = [
        ("user_message", '{"content":"hi"}'),
        (
            "assistant_message",
            '{"content":"yo","call":{"provider":"p","model":"m","agent":"a",'
            '"latency_ms":3,"usage":{"input_tokens":1}}}',
        ),
        ("tool_result", '{"call_id":"c","name":"f","content":"r","is_error":0}'),
    ]
    async with Journal(await journal_store(tmp_path / "j.sqlite3")) as journal:
        await journal.store.append("s", older, expected=0)
        assert [e.record for e in await journal.read("s")] == [old_decode(k, b) for k, b in older]
