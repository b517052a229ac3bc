"""The folds the engine keeps are bounded by bytes, not only by how many sessions they are.

:class:`~ankka.runtime.engine.lru.WeighedLRU` holds what :class:`SessionCache` and the
compactor keep; :func:`~ankka.runtime.engine.view.footprint` is its estimate of a message,
checked here against what the interpreter allocates.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from ankka.runtime.engine.lru import WeighedLRU
from ankka.runtime.engine.session import SessionCache, SessionState
from ankka.runtime.engine.view import SentView
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    ModelCall,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from ankka.runtime.records.registry import decode, encode
from ankka.runtime.store.journal import Journal
from tests.support.stores import journal_store


def turn(number: int, size: int, letter: str = "u") -> list[Message]:
    call = ModelCall("p", "m", "a", 1.5, Usage(10, 2))
    return [
        UserMessage(letter * size, "a", f"t{number}"),
        AssistantMessage(
            None,
            (ToolCall(f"c{number}", "f", json.dumps({"q": "x" * 40})),),
            "a",
            f"t{number}",
            call,
        ),
        ToolResult(f"c{number}", "f", letter * size, False, "a", f"t{number}"),
        AssistantMessage(letter * size, (), "a", f"t{number}", call, Usage(20, 4)),
    ]


def measured(turns: int, size: int, letter: str) -> tuple[int, int]:
    """(bytes allocated for a state folded from ``turns`` decoded turns, its footprint)."""
    encoded = [encode(m) for n in range(turns) for m in turn(n, size, letter)]
    tracemalloc.start()
    state = SessionState(SentView(), {})
    for seq, (kind, body) in enumerate(encoded, 1):
        state.add(seq, decode(kind, body))
    encoded.clear()  # the stored rows (and the UTF-8 the decoder cached on them) are let go
    allocated, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return allocated, state.footprint


def test_a_folds_footprint_is_near_what_it_holds_for_short_long_and_wide_text() -> None:
    for turns, size, letter in (
        (200, 10, "u"),
        (100, 2000, "u"),
        (20, 20_000, "ü"),
        (20, 5000, "😀"),
    ):
        allocated, estimated = measured(turns, size, letter)
        assert allocated / 2 <= estimated <= allocated * 2, (size, letter, allocated, estimated)


def test_the_lru_keeps_the_newest_within_both_bounds() -> None:
    lru: WeighedLRU[str, int] = WeighedLRU(lambda v: v, entries=3, max_bytes=100)
    for key, weight in (("a", 40), ("b", 40), ("c", 10)):
        lru.put(key, weight)
    assert len(lru) == 3 and lru.bytes == 90
    lru.put("d", 30)  # a fourth entry: the oldest goes
    assert "a" not in lru and lru.bytes == 80
    lru.put("b", 45)  # b again, heavier: the newest now
    lru.put("e", 50)  # past the bytes: the oldest (c, then d) go until they fit
    assert "c" not in lru and "d" not in lru and lru.bytes == 95
    lru.put("huge", 101)  # heavier than the whole budget: not kept, nothing else lost
    assert "huge" not in lru and "b" in lru and "e" in lru and lru.bytes == 95


async def test_long_sessions_stay_within_the_caches_bytes_and_fold_right_again(
    tmp_path: Path,
) -> None:
    budget = 2 * 1024 * 1024
    async with Journal(await journal_store(tmp_path / "j.sqlite3")) as journal:
        cache = SessionCache(journal, 1024, max_bytes=budget)
        for session in range(12):  # about 400 KB each: far fewer than 1,024, far more than 2 MB
            await journal.append(
                f"s{session}", [m for n in range(3) for m in turn(n, 30_000)], expected=0
            )
            await cache.load(f"s{session}")
            assert cache.bytes <= budget
        assert cache.bytes > 0
        again = await cache.load("s0")  # evicted long ago: folded again from the journal
        assert again.view.total_messages == 12 and cache.bytes <= budget
