"""Approvals are heard: a stream of pending approvals and their decisions, and a log line.

A request agent's tool call that needs a person answers the caller 202; everyone else who may
read the session hears of it on ``GET /v1/approvals/notifications`` (a snapshot of what is
pending, then the events, as a task's notifications), and the runtime's log says so. A caller
who may not read the session hears nothing of it. The loopback caller who decides is recorded
as ``local``, as the console records it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.eventually import eventually
from tests.support.processes import REPO, Server

pytestmark = pytest.mark.integration

SCRIPT: list[dict[str, Any]] = json.loads((REPO / "examples" / "refunds-standin.json").read_text())


class Listener:
    """``GET /v1/approvals/notifications`` read in a thread: the events as they arrive."""

    def __init__(self, url: str, headers: dict[str, str] | None = None, wait: float = 30) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.opened = threading.Event()
        self._thread = threading.Thread(
            target=self._read, args=(url, headers or {}, wait), daemon=True
        )
        self._thread.start()
        assert self.opened.wait(30), "the stream did not open"

    def _read(self, url: str, headers: dict[str, str], wait: float) -> None:
        with httpx.stream(
            "GET", f"{url}/v1/approvals/notifications", params={"wait": wait},
            headers=headers, timeout=wait + 30,
        ) as answer:  # fmt: skip
            event = ""
            for line in answer.iter_lines():
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    self.events.append((event, json.loads(line.removeprefix("data: "))))
                    self.opened.set()
        self.opened.set()

    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def join(self) -> None:
        self._thread.join(60)


def test_a_pending_approval_is_heard_on_the_stream_and_in_the_log(
    standin: Callable[[Any], Server], serve: Callable[..., Server]
) -> None:
    server = serve(standin(SCRIPT).url, target="examples.refunds:service")
    for wrong in ("soon", "301", "-1"):
        refused = httpx.get(f"{server.url}/v1/approvals/notifications", params={"wait": wrong})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["type"] == "invalid_request"
    listener = Listener(server.url, wait=20)
    assert listener.events[0] == ("snapshot", {"approvals": [], "next": None})

    turn = httpx.post(
        f"{server.url}/v1/agents/refunds/sessions/s1",
        json={"message": "Refund order A-1042, 250 euros."},
        timeout=60,
    )
    assert turn.status_code == 202, turn.text
    pending = turn.json()["approvals"][0]
    requested = eventually(
        lambda: [d for n, d in listener.events if n == "approval_requested"],
        what="approval_requested on the stream",
    )
    assert requested[0]["id"] == pending["id"]
    assert requested[0]["session"] == "s1"
    assert requested[0]["tool"] == "refund"
    assert requested[0]["digest"] == pending["digest"]

    # A subscriber who comes later finds it in the snapshot.
    late = Listener(server.url, wait=1)
    assert late.events[0][0] == "snapshot"
    assert [a["id"] for a in late.events[0][1]["approvals"]] == [pending["id"]]

    decided = httpx.post(
        f"{server.url}/v1/approvals/{pending['id']}",
        json={"decision": "approve", "digest": pending["digest"]},
        timeout=60,
    )
    assert decided.status_code == 200, decided.text
    assert decided.json()["decided_by"] == "local"  # one name for the loopback caller
    heard = eventually(
        lambda: [d for n, d in listener.events if n == "approval_decided"],
        what="approval_decided on the stream",
    )
    assert (heard[0]["id"], heard[0]["decision"], heard[0]["decided_by"]) == (
        pending["id"],
        "approved",
        "local",
    )
    log = eventually(
        lambda: "".join(server.output) if "approval_decided" in "".join(server.output) else "",
        what="the approval notices in the runtime's log",
    )
    assert f"ankka.approvals: approval_requested session=s1 agent=refunds id={pending['id']}" in log
    listener.join()
    late.join()


def test_a_caller_who_may_not_read_the_session_hears_nothing_of_it(
    standin: Callable[[Any], Server], serve: Callable[..., Server], tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("alice alice-token-0123456789\nbob bob-token-0123456789\n")
    server = serve(
        standin(SCRIPT).url, target="examples.refunds:service", args=["--token-file", str(tokens)]
    )
    alice = {"Authorization": "Bearer alice-token-0123456789"}
    bob = Listener(server.url, headers={"Authorization": "Bearer bob-token-0123456789"}, wait=6)
    own = Listener(server.url, headers=alice, wait=6)
    turn = httpx.post(
        f"{server.url}/v1/agents/refunds/sessions/mine",
        json={"message": "Refund order A-1042, 250 euros."},
        headers=alice,
        timeout=60,
    )
    assert turn.status_code == 202, turn.text
    eventually(lambda: "approval_requested" in own.names(), what="alice hears her request")
    bob.join()
    assert bob.names() == ["snapshot"]
    assert bob.events[0][1] == {"approvals": [], "next": None}
    own.join()
