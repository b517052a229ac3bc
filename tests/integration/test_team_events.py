"""A team watched over real processes: ``ankka serve examples.newsroom:service`` with the
stand-in as the model, on SQLite (one process) and on PostgreSQL (two processes on one store,
the stream read from the one the items were not put to).

- ``GET /v1/teams/{team}/events`` streams the backlog's item events and the channel's
  messages as they happen; a stream left mid-way and resumed with ``Last-Event-ID`` gets
  every later event once: what the two connections got is exactly the whole log as
  ``?after=0`` replays it, the ids growing with no repeat. A quiet stream sends keep-alives.
- ``GET /v1/teams/{team}/summary`` counts by state, shows the claim held and the budget's
  use, which is what the items' tasks spent.
- A caller's stream carries only what it may read of the team; past a caller's streams, 429.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script, model_env
from tests.integration.test_team_lead_access import PLATFORM, TOKENS, _serve
from tests.integration.test_teams import DRAFT, STANDIN, SUMMARY
from tests.support.eventually import eventually
from tests.support.postgres import fresh_database
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

ROUTE = "/v1/teams/newsroom"
LATER = {"type": "draft", "instructions": "Write a follow-up.", "depends_on": ["draft-1"]}
NOTE = {"to": "everyone", "kind": "note", "text": "The sqlite piece runs Monday."}
TOKENS_SPENT = sum(s["usage"]["input_tokens"] + s["usage"]["output_tokens"] for s in STANDIN[:3])


def _serve_newsroom(model: Server, store: str) -> Server:
    command = ankka_command("serve", "examples.newsroom:service", "--port", "0", "--store", store)
    return start(command, env=model_env(model.url))


Event = dict[str, Any]


def _read(lines: Iterator[str], until: Callable[[list[Event]], bool]) -> list[Event]:
    """Events (and comments, as ``{"comment": ...}``) from an SSE body until ``until`` holds
    of them, or the body ends."""
    got: list[Event] = []
    current: dict[str, str] = {}
    for line in lines:
        if line.startswith(":"):
            got.append({"comment": line[1:].strip()})
        elif line:
            field, _, value = line.partition(":")
            current[field] = value.removeprefix(" ")
            continue
        elif current:
            got.append(
                {
                    "id": int(current["id"]) if "id" in current else None,
                    "event": current["event"],
                    "data": json.loads(current["data"]),
                }
            )
            current = {}
        else:
            continue
        if until(got):
            return got
    return got


def _events(got: list[Event]) -> list[Event]:
    return [e for e in got if "event" in e]


def _has(got: list[Event], event: str, item: str, **data: Any) -> bool:
    return any(
        e.get("event") == event
        and e["data"].get("item") == item
        and all(e["data"].get(k) == v for k, v in data.items())
        for e in got
    )


@contextlib.contextmanager
def _stream(url: str, **kw: Any) -> Iterator[Iterator[str]]:
    with httpx.stream("GET", url, timeout=httpx.Timeout(30, read=60), **kw) as answer:
        assert answer.status_code == 200, answer.read()
        assert answer.headers["content-type"].startswith("text/event-stream")
        yield answer.iter_lines()


@pytest.fixture(params=["sqlite", "postgres"])
def newsroom_pair(
    request: pytest.FixtureRequest,
    standin: Callable[[Script], Server],
    servers: list[Server],
    tmp_path: Path,
) -> tuple[Server, Server, Server]:
    """(where items are put, where the stream is read, the model): one process on SQLite,
    two processes on one PostgreSQL store."""
    script = [{**STANDIN[0], "delay_ms": 3000}, *STANDIN[1:3]]  # the summary's claim is seen
    model = standin(script)
    if request.param == "sqlite":
        one = _serve_newsroom(model, f"sqlite:///{tmp_path / 'store.sqlite3'}")
        servers.append(one)
        return one, one, model
    store = fresh_database(request.getfixturevalue("postgres_server"), "newsroom")
    servers.extend(_serve_newsroom(model, store) for _ in range(2))
    return servers[-2], servers[-1], model


def test_a_teams_stream_resumed_with_last_event_id_loses_and_repeats_nothing(
    newsroom_pair: tuple[Server, Server, Server],
) -> None:
    writer, reader, _ = newsroom_pair
    with _stream(f"{reader.url}{ROUTE}/events", params={"wait": 120}) as lines:
        first = _read(lines, lambda got: len(got) >= 1)
        snapshot = first[0]
        assert snapshot["event"] == "snapshot" and snapshot["id"] == 0
        assert snapshot["data"]["counts"]["ready"] == 0 and snapshot["data"]["items"] == 0
        with httpx.Client(base_url=f"{writer.url}{ROUTE}", timeout=30) as client:
            assert client.put("/items/sqlite", json=SUMMARY).status_code == 201
            assert client.put("/items/draft-1", json=DRAFT).status_code == 201
            moved = client.post("/items/draft-1/priority", json={"priority": 5})
            assert moved.status_code == 200, moved.text
            assert client.put("/items/later", json=LATER).status_code == 201
            assert client.post("/items/later/cancel").status_code == 200
            assert client.post("/messages", json=NOTE).status_code == 201
            # While the researcher's first call is held, the summary shows its claim.
            held = eventually(
                lambda: (s := client.get("/summary").json())["counts"]["claimed"] == 1 and s,
                what="the summary to show sqlite claimed",
                timeout=60,
            )
        assert held["oldest_claim"]["item"] == "sqlite" and held["oldest_claim"]["age_seconds"] >= 0
        assert held["budget"]["iterations"]["reserved"] > 0
        # Read until the summary's claim is seen, then leave mid-way.
        before = _read(lines, lambda got: _has(got, "item_claimed", "sqlite"))
    assert _has(before, "item_claimed", "sqlite", agent="researcher")
    last = _events(before)[-1]["id"]
    headers = {"last-event-id": str(last)}
    with _stream(f"{reader.url}{ROUTE}/events", params={"wait": 120}, headers=headers) as lines:
        after = _read(lines, lambda got: _has(got, "item_ended", "draft-1"))
        assert _has(after, "item_ended", "draft-1", state="completed")
        # Nothing more happens: the stream says it is alive.
        quiet = _read(lines, lambda got: any("comment" in e for e in got))
    assert {"comment": "keep-alive"} in quiet and not _events(quiet)
    assert after[0]["event"] != "snapshot"  # a resumed stream starts after its last id

    with _stream(f"{reader.url}{ROUTE}/events", params={"after": 0, "wait": 0}) as lines:
        replay = _events(_read(lines, lambda got: False))
    received = _events(before) + _events(after)  # (the snapshot, read first, is not the log's)
    assert [e["id"] for e in received] == [e["id"] for e in replay]
    assert [e["id"] for e in replay] == list(range(1, len(replay) + 1))  # no gap, no repeat
    assert received == replay
    events = [(e["event"], e["data"].get("item")) for e in replay]
    for item, expected in {
        "sqlite": ["item_added", "item_claimed", "item_ended"],
        "draft-1": ["item_added", "item_reprioritised", "item_ready", "item_claimed", "item_ended"],
        "later": ["item_added", "item_ended"],
    }.items():
        assert [e for e, i in events if i == item] == expected, (item, events)
    assert _has(replay, "item_ended", "later", state="cancelled", reason="cancelled")
    assert _has(replay, "item_added", "draft-1", state="waiting")
    sent = [e["data"]["message"] for e in replay if e["event"] == "message"]
    assert [(m["text"], m["to"], m["kind"]) for m in sent] == [(NOTE["text"], "everyone", "note")]

    summary = httpx.get(f"{reader.url}{ROUTE}/summary", timeout=30).json()
    assert summary["counts"] == {
        "waiting": 0, "ready": 0, "claimed": 0, "completed": 2, "failed": 0, "cancelled": 1,
    }  # fmt: skip
    assert summary["items"] == 3 and summary["oldest_claim"] is None
    assert summary["last_event"] == replay[-1]["id"]
    iterations = sum(
        httpx.get(f"{reader.url}/v1/tasks/team:newsroom:{i}", timeout=30).json()["iterations"][
            "used"
        ]
        for i in ("sqlite", "draft-1")
    )
    assert summary["budget"] == {
        "iterations": {"limit": 40, "used": iterations, "reserved": 0},
        "tokens": {"limit": None, "used": TOKENS_SPENT, "reserved": 0},
    }


def test_a_callers_stream_carries_only_what_it_may_read_and_is_bounded(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    """(``tests.integration.lead_access_services``: alice, bob, carol whom the lead's access
    names, the platform.)"""
    server = _serve(standin([]), tmp_path, tmp_path / "hold")
    servers.append(server)

    def auth(who: str) -> dict[str, str]:
        return {"authorization": f"Bearer {TOKENS[who]}"}

    def call(who: str, method: str, path: str, **kw: Any) -> httpx.Response:
        url = f"{server.url}/v1/teams/desk{path}"
        return httpx.request(method, url, headers=auth(who), timeout=30, **kw)

    note = {"type": "note", "instructions": "Alice's own note."}
    assert call("alice", "PUT", "/items/a0", json=note).status_code == 201
    message = {"to": "clerk", "kind": "note", "text": "Bob's note.", "id": "b1"}
    assert call("bob", "POST", "/messages", json=message).status_code == 201

    def log(who: str) -> list[Event]:
        url = f"{server.url}/v1/teams/desk/events"
        with _stream(url, params={"after": 0, "wait": 0}, headers=auth(who)) as lines:
            return _events(_read(lines, lambda got: False))

    def shown(who: str) -> set[str]:
        return {e["data"].get("item") or e["data"]["message"]["id"] for e in log(who)}

    assert shown("alice") == {"a0"} and shown("bob") == {"b1"}
    assert shown("carol") == {"a0", "b1"} == shown(PLATFORM)
    assert call("bob", "GET", "/summary").json()["items"] == 0  # alice's item is not bob's
    assert call("alice", "GET", "/summary").json()["items"] == 1
    refused = httpx.get(f"{server.url}/v1/teams/desk/events", timeout=30)
    assert refused.status_code == 401  # no token
    assert call("alice", "GET", "/events", params={"wait": 0}).status_code == 200
    bad = httpx.get(
        f"{server.url}/v1/teams/desk/events",
        headers={**auth("alice"), "last-event-id": "not-a-number"},
        timeout=30,
    )
    assert bad.status_code == 422 and "Last-Event-ID" in bad.text, bad.text
    superscript = httpx.get(  # '²' (latin-1 0xB2): a digit to str.isdigit(), not to int()
        f"{server.url}/v1/teams/desk/events",
        headers=[
            (b"authorization", auth("alice")["authorization"].encode()),
            (b"last-event-id", b"\xb2"),
        ],
        timeout=30,
    )
    assert superscript.status_code == 422, superscript.text
    elsewhere = f"{server.url}/v1/teams/nowhere/events"
    assert httpx.get(elsewhere, headers=auth("alice"), timeout=30).status_code == 404
    url = f"{server.url}/v1/teams/desk/events"
    with contextlib.ExitStack() as open_streams:
        for _ in range(4):  # a caller's share of the streams
            open_streams.enter_context(_stream(url, params={"wait": 60}, headers=auth("alice")))
        past = call("alice", "GET", "/events", params={"wait": 1})
        assert past.status_code == 429 and "too_many_streams" in past.text, past.text
        assert "retry-after" in past.headers
        assert call("bob", "GET", "/events", params={"wait": 0}).status_code == 200  # his own
    eventually(  # once the runtime has seen them closed
        lambda: call("alice", "GET", "/events", params={"wait": 0}).status_code == 200,
        what="alice's closed streams given back",
        timeout=30,
    )
