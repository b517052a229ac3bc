"""The journal stores and the fold.

Store tests take the ``open_journal`` fixture, parametrized by store kind, so a new store (the
PostgreSQL one) runs this same suite by adding its opener to ``STORES``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from ankka._kernel.errors import StoreError
from ankka.runtime.records import registry as events
from ankka.runtime.records.accounting import UnwrittenCalls
from ankka.runtime.records.compaction import CompactionRejected, HistoryCompacted
from ankka.runtime.records.conversations import (
    ConversationCutOff,
    ConversationEnded,
    ConversationResumed,
    TurnSkipped,
)
from ankka.runtime.records.fold import fold
from ankka.runtime.records.iterations import IterationCompleted, IterationStarted
from ankka.runtime.records.messages import (
    AssistantMessage,
    ModelCall,
    SummaryMessage,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from ankka.runtime.store.journal import Journal
from ankka.runtime.store.journal_store import ConcurrentAppend, JournalStore
from ankka.runtime.store.open import open_store
from tests.support.stores import journal_store

TURN = (
    UserMessage("hi", "a", "t1"),
    AssistantMessage(
        None,
        (ToolCall("c1", "f", '{"x": 1}'),),
        "a",
        "t1",
        ModelCall("p", "m", "a", 1.5, Usage(3, 4, 1, 0)),
    ),
    ToolResult("c1", "f", "done", False, "a", "t1"),
    AssistantMessage(
        "bye", (), "a", "t1", ModelCall("p", "m", "a", 2.0, Usage(5, 6)), Usage(8, 10, 1)
    ),
)


OpenJournal = Callable[[], Awaitable[JournalStore]]


def _sqlite(tmp_path: Path) -> OpenJournal:
    async def open_it() -> JournalStore:
        return await journal_store(tmp_path / "j.sqlite3")

    return open_it


@pytest.fixture(params=["sqlite", "postgres"])
def open_journal(request: pytest.FixtureRequest, tmp_path: Path) -> OpenJournal:
    """Opens the same journal (same file or database) each time it is called."""
    if request.param == "sqlite":
        return _sqlite(tmp_path)
    dsn: str = request.getfixturevalue("postgres_server")
    database = f"journal_{uuid.uuid4().hex[:12]}"

    async def open_postgres() -> JournalStore:
        if not created:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                await conn.execute(f"CREATE DATABASE {database}")
            created.append(database)
        return await journal_store(dsn.rsplit("/", 1)[0] + f"/{database}")

    created: list[str] = []
    return open_postgres


SUMMARY = SummaryMessage("s", 3, "t0", "c")
COMPACTED = HistoryCompacted(
    first=1,
    through=4,
    summary="s",
    replaces=4,
    provider="p",
    model="m",
    usage=Usage(9, 2),
    chars_before=120,
    chars_after=40,
)
REJECTED = CompactionRejected(
    first=1,
    through=4,
    reason="empty",
    detail="no text",
    provider="p",
    model="m",
    usage=Usage(9, 0),
    at=datetime(2026, 12, 1, 8, 0, tzinfo=UTC),
)
RECORDS = (
    *TURN,
    COMPACTED,
    REJECTED,
    IterationStarted(2),
    IterationCompleted(2, Usage(7, 3)),
    TurnSkipped("t2", "writer", "speaker_silent", "said nothing within 5 s"),
    ConversationEnded("t2", "max_turns", "3 turns, its max_turns"),
    ConversationCutOff("t3", "caller_left"),
    ConversationResumed("t3"),
)

# The stored format, byte for byte, as sessions already on disk hold it.
STORED = [
    ("user_message", '{"content":"hi","agent":"a","turn":"t1"}'),
    (
        "assistant_message",
        '{"content":null,"tool_calls":[{"id":"c1","name":"f","arguments":"{\\"x\\": 1}"}],'
        '"call":{"provider":"p","model":"m","agent":"a","latency_ms":1.5,"usage":{"input_tokens"'
        ':3,"output_tokens":4,"cache_read_tokens":1,"cache_write_tokens":0}},"agent":"a",'
        '"turn":"t1"}',
    ),
    (
        "tool_result",
        '{"call_id":"c1","name":"f","content":"done","is_error":false,"agent":"a","turn":"t1"}',
    ),
    (
        "assistant_message",
        '{"content":"bye","call":{"provider":"p","model":"m","agent":"a","latency_ms":2.0,'
        '"usage":{"input_tokens":5,"output_tokens":6,"cache_read_tokens":0,"cache_write_tokens"'
        ':0}},"turn_usage":{"input_tokens":8,"output_tokens":10,"cache_read_tokens":1,'
        '"cache_write_tokens":0},"agent":"a","turn":"t1"}',
    ),
    (
        "history_compacted",
        '{"first":1,"through":4,"summary":"s","replaces":4,"provider":"p","model":"m","usage":'
        '{"input_tokens":9,"output_tokens":2,"cache_read_tokens":0,"cache_write_tokens":0},'
        '"chars_before":120,"chars_after":40}',
    ),
    (
        "compaction_rejected",
        '{"first":1,"through":4,"reason":"empty","detail":"no text","provider":"p","model":"m",'
        '"usage":{"input_tokens":9,"output_tokens":0,"cache_read_tokens":0,'
        '"cache_write_tokens":0},"at":"2026-12-01T08:00:00+00:00"}',
    ),
    ("iteration_started", '{"number":2}'),
    (
        "iteration_completed",
        '{"number":2,"usage":{"input_tokens":7,"output_tokens":3,"cache_read_tokens":0,'
        '"cache_write_tokens":0}}',
    ),
    (
        "turn_skipped",
        '{"turn":"t2","speaker":"writer","reason":"speaker_silent",'
        '"detail":"said nothing within 5 s"}',
    ),
    ("conversation_ended", '{"turn":"t2","reason":"max_turns","detail":"3 turns, its max_turns"}'),
    ("conversation_cut_off", '{"turn":"t3","cause":"caller_left"}'),
    ("conversation_resumed", '{"turn":"t3"}'),
]


def test_every_record_survives_its_encoding() -> None:
    for record in RECORDS:
        assert events.decode(*events.encode(record)) == record


def test_the_stored_encoding_is_the_one_sessions_on_disk_hold() -> None:
    assert [events.encode(m) for m in RECORDS] == STORED
    assert [events.decode(k, b) for k, b in STORED] == list(RECORDS)


def test_a_summary_is_never_journaled_as_a_message() -> None:
    with pytest.raises(TypeError, match="HistoryCompacted"):
        events.encode(SUMMARY)


def test_a_message_renders_once_for_the_api_and_the_journal() -> None:
    rendered = [m.as_dict() for m in (*TURN, SUMMARY)]
    assert [r["role"] for r in rendered] == ["user", "assistant", "tool", "assistant", "summary"]
    assert rendered[1]["model_call"]["usage"]["input_tokens"] == 3
    assert rendered[2]["tool_call_id"] == "c1" and rendered[3]["usage"]["output_tokens"] == 10
    stored = [json.loads(body) for _, body in STORED[: len(TURN)]]
    for shown, kept in zip(rendered[: len(TURN)], stored, strict=True):
        renamed = {"model_call": "call", "usage": "turn_usage", "tool_call_id": "call_id"}
        assert {renamed.get(k, k): v for k, v in shown.items() if k != "role"} == kept


def test_an_unknown_event_kind_is_named() -> None:
    with pytest.raises(ValueError, match="unknown journal event kind 'task_started'"):
        events.decode("task_started", "{}")


async def test_the_journal_appends_records_and_reads_them_back_with_positions(
    open_journal: OpenJournal,
) -> None:
    async with Journal(await open_journal()) as journal:
        assert await journal.append("s", TURN[:2], expected=0) == 2
        assert await journal.append("s", TURN[2:], expected=2) == 4
        entries = await journal.read("s", after=1)
        assert [(e.seq, e.record) for e in entries] == list(zip([2, 3, 4], TURN[1:], strict=True))
        assert all(e.at.tzinfo is not None for e in entries)
        assert await journal.conversation("s") == list(TURN)
        assert await journal.sessions() == ["s"]
        with pytest.raises(ConcurrentAppend):
            await journal.append("s", [COMPACTED], expected=2)
        assert len(await journal.read("s")) == 4


async def test_only_a_store_shared_by_pods_declares_a_session_lock(
    open_journal: OpenJournal, request: pytest.FixtureRequest
) -> None:
    async with Journal(await open_journal()) as journal:
        lock = journal.session_lock()
        if "sqlite" in request.node.callspec.id:
            assert lock is None
        else:
            assert lock is not None
            async with lock.hold("s"):
                assert await journal.append("s", TURN, expected=0) == 4


async def test_appends_are_read_back_in_order_after_reopening(open_journal: OpenJournal) -> None:
    store = await open_journal()
    try:
        position = await store.append("s", [events.encode(m) for m in TURN], expected=0)
        assert position == 4
    finally:
        await store.close()
    store = await open_journal()
    try:
        stored = await store.read("s")
        assert [e.seq for e in stored] == [1, 2, 3, 4]
        assert fold(events.decode(e.kind, e.body) for e in stored) == list(TURN)
        assert [e.seq for e in await store.read("s", after=2)] == [3, 4]
        assert await store.read("other") == []
        assert await store.sessions() == ["s"]
    finally:
        await store.close()


async def test_an_append_on_a_stale_position_is_refused_and_writes_nothing(
    open_journal: OpenJournal,
) -> None:
    store = await open_journal()
    try:
        await store.append("s", [events.encode(TURN[0])], expected=0)
        with pytest.raises(ConcurrentAppend):
            await store.append("s", [events.encode(m) for m in TURN], expected=0)
        assert len(await store.read("s")) == 1
    finally:
        await store.close()


async def test_the_conversation_keeps_every_message_past_compaction_records() -> None:
    more = UserMessage("more", "a", "t2")
    assert fold([*TURN, COMPACTED, more, REJECTED]) == [*TURN, more]


async def test_an_unwritable_path_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match=r"cannot open the session store .*--store"):
        await open_store(f"sqlite:///{blocker}/sub/j.sqlite3")


async def test_an_unknown_store_scheme_is_named() -> None:
    with pytest.raises(Exception, match="unknown store scheme 'redis'"):
        await open_store("redis://localhost")


async def test_a_postgres_server_that_is_not_there_is_a_clear_error() -> None:
    with pytest.raises(StoreError, match="cannot open the PostgreSQL session store") as error:
        await open_store("postgresql://ankka:hunter2@127.0.0.1:9/db")
    assert "hunter2" not in str(error.value)


def test_an_accounting_record_is_stored_beside_the_messages_and_leaves_the_fold_alone() -> None:
    call = ModelCall("p", "m", "a", 2.0, Usage(5, 6))
    record = UnwrittenCalls("t2", "a", "turn_failed", (call,))
    kind, body = events.encode(record)
    assert kind == "unwritten_calls"
    assert body == (
        '{"turn":"t2","agent":"a","reason":"turn_failed","calls":[{"provider":"p","model":"m",'
        '"agent":"a","latency_ms":2.0,"usage":{"input_tokens":5,"output_tokens":6,'
        '"cache_read_tokens":0,"cache_write_tokens":0}}]}'
    )
    assert events.decode(kind, body) == record
    assert fold([*TURN, record]) == list(TURN)
