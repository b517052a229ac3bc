"""Delegation across runtimes, over two real ``ankka serve`` processes on loopback with mTLS:
the lead's runtime knows the researcher as a peer (``ANKKA_PEERS``), the researcher's runtime
names the lead's identity among its delegators (``ANKKA_DELEGATORS``). The stand-in is the
model of both. SIGKILLed mid-wait (the lead's runtime) or mid-child (the researcher's), a new
process carries on: each child is made once, each end told once, no recorded model call is
asked again, and the lead's ``tree_usage`` counts the remote children's spend once."""

from __future__ import annotations

import contextlib
import copy
import json
import secrets
import socket
import sqlite3
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ankka.runtime.records.messages import Usage
from tests.integration.conftest import Script, model_env
from tests.integration.tasks_crash import asked_keys, dump, model_requests, recorded_keys
from tests.integration.test_delegation import CHILDREN, REPORT, STANDIN, in_flight, slowed
from tests.support.certs import CA, client_context, new_ca, write_tls_dir
from tests.support.eventually import eventually
from tests.support.jaeger import Jaeger
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

LEAD = "ankka://service/team/lead"
RESEARCHER = "ankka://service/team/researcher"
ALICE = "ankka://service/team/alice"
LEAD_CALLER = "team/lead"  # the lead's runtime, as the identity layer names it


@dataclass
class Pair:
    """The two runtimes' settings: their stores, TLS folders, the researcher's port."""

    root: Path
    ca: CA
    model: Server
    port: int
    servers: list[Server]

    def store(self, side: str) -> str:
        return f"sqlite:///{self.root / f'{side}.sqlite3'}"

    def researcher(
        self, delegators: str = LEAD_CALLER, env: dict[str, str] | None = None
    ) -> Server:
        tls = write_tls_dir(
            self.root / "researcher-tls", leaf=self.ca.issue(RESEARCHER, runtime=True),
            ca_pem=self.ca.pem,
        )  # fmt: skip
        command = ankka_command(
            "serve", "examples.team:service", "--port", str(self.port),
            "--store", self.store("researcher"), "--tls-dir", str(tls),
        )  # fmt: skip
        extra = {**model_env(self.model.url), "ANKKA_DELEGATORS": delegators, **(env or {})}
        return self._started(command, extra)

    def lead(
        self, env: dict[str, str] | None = None, target: str = "examples.team:service"
    ) -> Server:
        tls = write_tls_dir(
            self.root / "lead-tls", leaf=self.ca.issue(LEAD, runtime=True), ca_pem=self.ca.pem
        )
        command = ankka_command(
            "serve", target, "--port", "0", "--store", self.store("lead"),
            "--tls-dir", str(tls),
        )  # fmt: skip
        peers = {"researcher": {"url": f"https://127.0.0.1:{self.port}", "identity": RESEARCHER}}
        extra = {**model_env(self.model.url), "ANKKA_PEERS": json.dumps(peers), **(env or {})}
        return self._started(command, extra)

    def _started(self, command: list[str], env: dict[str, str]) -> Server:
        server = start(command, env=env)
        server.url = server.url.replace("http://", "https://")
        self.servers.append(server)
        return server

    def client(self, who: str = ALICE) -> httpx.Client:
        stem = who.rsplit("/", 1)[-1]
        context: ssl.SSLContext = client_context(self.ca, self.ca.issue(who), self.root, stem=stem)
        return httpx.Client(verify=context, timeout=120)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def pair(standin: Callable[[Script], Server], tmp_path: Path) -> Iterator[Callable[..., Pair]]:
    made: list[Pair] = []

    def make(script: Script = STANDIN) -> Pair:
        made.append(Pair(tmp_path, new_ca(), standin(script), free_port(), []))
        return made[-1]

    yield make
    for pair_ in made:
        for server in pair_.servers:
            server.stop()


def kill(server: Server) -> None:
    server.process.kill()  # SIGKILL: no shutdown, no flush
    server.process.wait()


def final(client: httpx.Client, server: Server, task: str) -> dict[str, Any]:
    answer = client.get(f"{server.url}/v1/tasks/{task}", params={"wait": 100})
    assert answer.status_code == 200, answer.text
    record: dict[str, Any] = answer.json()
    return record


def told_of(client: httpx.Client, lead: Server) -> list[dict[str, Any]]:
    """The delegation calls' results in the report's session."""
    history = client.get(f"{lead.url}/v1/sessions/task:r1/messages").json()["messages"]
    return [
        json.JSONDecoder().raw_decode(m["content"])[0]
        for m in history
        if m["role"] == "tool" and m.get("name", "").startswith("delegate__")
    ]


def check(pair: Pair, lead: Server, researcher: Server) -> None:
    """The report is done, with one section per remote summary, each told once, and every
    call of the tree counted once in the lead's tree_usage."""
    with pair.client() as alice:
        report = final(alice, lead, "r1")
    assert report["state"] == "completed", dump(report)
    assert report["result"] == STANDIN[-1]["tool_calls"][0]["arguments"]
    assert report["children"] == CHILDREN
    with pair.client(LEAD) as as_lead:  # the children are the lead runtime's (it made them)
        children = {c: final(as_lead, researcher, c) for c in CHILDREN}
    for child in children.values():
        assert child["state"] == "completed", dump(child)
        assert child["parent"] == "r1" and child["created_by"] == LEAD_CALLER
    # The tree's budget went with them: the lead (8) had 7 left after its first call; the
    # first child was given its type's 5, the second what remained, 2.
    assert [c["iterations"]["budget"] for c in children.values()] == [5, 2]
    with pair.client() as alice:
        told = told_of(alice, lead)
    assert sorted((t["status"], t["task"]) for t in told) == [
        ("completed", "r1:1.0"),
        ("completed", "r1:1.1"),
    ], dump(told)
    for key in report["usage"]:
        own = report["usage"][key] + sum(c["tree_usage"][key] for c in children.values())
        assert report["tree_usage"][key] == own, key
    assert report["tree_iterations"] == 6
    assert remote_rows(pair.root / "lead.sqlite3") == [(c, "researcher", 1) for c in CHILDREN]


def remote_rows(path: Path) -> list[tuple[str, str, int]]:
    """The lead's tree rows of remote children: each made once, each settled."""
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT task, remote, settled FROM ankka_task_tree WHERE remote IS NOT NULL "
            "ORDER BY task"
        ).fetchall()
    return [(str(t), str(r), int(s)) for t, r, s in rows]


def test_a_remote_child_is_in_the_trace_of_the_call_that_delegated_it(
    pair: Callable[..., Pair], jaeger_backend: Jaeger
) -> None:
    two = pair()
    researcher = two.researcher(env=jaeger_backend.env("researcher"))
    lead = two.lead(env=jaeger_backend.env("lead"))
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    with two.client() as alice:
        answer = alice.put(
            f"{lead.url}/v1/agents/lead/tasks/r1",
            json=REPORT,
            headers={"traceparent": f"00-{trace_id}-{caller}-01"},
        )
    assert answer.status_code == 201, answer.text
    check(two, lead, researcher)
    delegate, put, stream, follow = (
        "execute_tool delegate__researcher__summary",
        "PUT /v1/agents/{agent}/tasks/{task}",
        "GET /v1/tasks/{task}/notifications",
        "GET /v1/tasks/{task}",
    )
    spans = jaeger_backend.trace(
        trace_id,
        names={put, stream, follow, delegate, "invoke_agent lead", "invoke_agent researcher"},
        caller=caller,  # and every span's parent is in the trace (or is the caller's)
    )
    assert {s.trace_id for s in spans} == {trace_id}
    calls = [s for s in spans if s.name == delegate and s.service == "lead"]
    at_peer = [s for s in spans if s.name == put and s.service == "researcher"]
    assert len(calls) == 2 and at_peer
    # The peer's PUT continues the delegating call's span; the child's iterations are under it.
    assert {s.parent_id for s in at_peer} == {c.span_id for c in calls}
    iterations = [s for s in spans if s.name == "invoke_agent researcher"]
    assert iterations and {s.parent_id for s in iterations} <= {s.span_id for s in at_peer}
    assert {s.service for s in iterations} == {"researcher"}
    # The relay of each child's own events opens the child's stream at the peer in the same
    # trace: the peer's span for it continues that child's delegating call too.
    streams = [s for s in spans if s.name == stream and s.service == "researcher"]
    assert streams and {s.parent_id for s in streams} <= {c.span_id for c in calls}, streams
    # So does each GET ?wait= the lead follows a child with, until its end.
    follows = [s for s in spans if s.name == follow and s.service == "researcher"]
    assert follows and {s.parent_id for s in follows} <= {c.span_id for c in calls}, follows


def test_a_lead_delegates_to_a_researcher_another_runtime_serves_over_mtls(
    pair: Callable[..., Pair],
) -> None:
    two = pair()
    researcher, lead = two.researcher(), two.lead()
    with two.client() as alice:
        answer = alice.put(f"{lead.url}/v1/agents/lead/tasks/r1", json=REPORT)
    assert answer.status_code == 201, answer.text
    check(two, lead, researcher)
    assert len(model_requests(two.model)) == 6
    # Only a delegator may send a body naming a parent: alice is not one.
    body = {"type": "summary", "instructions": "x", "parent": "p", "lineage": ["lead"]}
    with two.client() as alice:
        refused = alice.put(f"{researcher.url}/v1/agents/researcher/tasks/x", json=body)
    assert refused.status_code == 403, refused.text
    assert "ANKKA_DELEGATORS" in refused.json()["error"]["message"]
    # Nor may a delegator send a cycle.
    cycle = {**body, "lineage": ["researcher", "lead"]}
    with two.client(LEAD) as as_lead:
        refused = as_lead.put(f"{researcher.url}/v1/agents/researcher/tasks/y", json=cycle)
    assert refused.status_code == 422, refused.text
    assert "researcher → lead → researcher" in refused.json()["error"]["message"]


@pytest.mark.parametrize("killed", ["the lead's runtime", "the researcher's runtime"])
def test_either_runtime_killed_mid_delegation_loses_and_repeats_nothing(
    pair: Callable[..., Pair], killed: str
) -> None:
    two = pair(slowed((1, 2), 2500))  # the children's first calls take a while
    researcher, lead = two.researcher(), two.lead()
    with two.client() as alice:
        assert alice.put(f"{lead.url}/v1/agents/lead/tasks/r1", json=REPORT).status_code == 201
    eventually(lambda: in_flight(two.model, 3), what="the children's calls in flight", timeout=60)
    side = "lead" if killed == "the lead's runtime" else "researcher"
    kill(lead if side == "lead" else researcher)
    recorded = recorded_keys(two.store(side))
    assert ("r1", 0) in recorded_keys(two.store("lead"))  # the delegating answer, recorded
    before = len(model_requests(two.model))
    if side == "lead":
        lead = two.lead()
    else:
        researcher = two.researcher()  # the same port: the lead's runtime finds it again
    check(two, lead, researcher)
    again = sorted(set(asked_keys(model_requests(two.model)[before:])) & recorded)
    assert again == [], f"recorded calls asked again after the restart: {again}"
    assert asked_keys(model_requests(two.model)).count(("r1", 0)) == 1


def made_rows(path: Path) -> list[tuple[str, int]]:
    """Which remote children the lead's store records as made at their peer."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT task, created FROM ankka_remote_children ORDER BY task")
        return [(str(t), int(c)) for t, c in rows.fetchall()]


def test_a_child_made_before_the_leads_restart_is_followed_after_it_not_created_again(
    pair: Callable[..., Pair],
) -> None:
    """The lead's runtime SIGKILLed once its children were made (their calls in flight at
    the researcher), then the researcher's policy changed: it no longer names the lead
    among its delegators, so a PUT sent again would be refused (403). The store says the
    children were made, so the new process sends no PUT: it reads them, and they end."""
    two = pair(slowed((1, 2), 2500))
    researcher, lead = two.researcher(), two.lead()
    with two.client() as alice:
        assert alice.put(f"{lead.url}/v1/agents/lead/tasks/r1", json=REPORT).status_code == 201
    eventually(lambda: in_flight(two.model, 3), what="the children's calls in flight", timeout=60)
    kill(lead)
    assert made_rows(two.root / "lead.sqlite3") == [(c, 1) for c in CHILDREN]
    kill(researcher)
    researcher = two.researcher(delegators="team/someone-else")
    with two.client(LEAD) as as_lead:  # a PUT sent again would now be refused
        body = {"type": "summary", "instructions": "x", "parent": "r1", "lineage": ["lead"]}
        refused = as_lead.put(f"{researcher.url}/v1/agents/researcher/tasks/r1:1.0", json=body)
    assert refused.status_code == 403, refused.text
    lead = two.lead()
    check(two, lead, researcher)


def reported(path: Path) -> dict[str, dict[str, Any] | None]:
    """The spend the lead's store keeps of each remote child, as its peer last reported it."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT task, reported FROM ankka_remote_children ORDER BY task")
        return {str(t): None if r is None else json.loads(r) for t, r in rows.fetchall()}


def test_a_child_its_peer_lost_across_a_leads_restart_is_counted_with_its_last_reported_spend(
    pair: Callable[..., Pair],
) -> None:
    """Each child does one iteration (its lookup), then its second call hangs. Once the lead
    has read that spend (a wait of 10 s ending with the child not final), its runtime is
    SIGKILLed; the researcher's too, and it starts again on a new store (it knows no child).
    The lead's new process reads the children, is answered 404, and counts what the peer had
    reported before the kill: one iteration and its tokens each."""
    slow = [dict(STANDIN[i], delay_ms=60_000) for i in (3, 4)]  # the children's second calls
    two = pair([*STANDIN[:3], *slow, STANDIN[-1]])
    researcher, lead = two.researcher(), two.lead()
    with two.client() as alice:
        assert alice.put(f"{lead.url}/v1/agents/lead/tasks/r1", json=REPORT).status_code == 201
    tokens = Usage(180, 14).as_dict()
    one: dict[str, Any] = {"iterations": 1, "usage": tokens}
    store = two.root / "lead.sqlite3"
    eventually(
        lambda: reported(store) == {c: one for c in CHILDREN},
        what="the children's first iterations reported to the lead",
        timeout=90,
    )
    kill(lead)
    kill(researcher)
    for path in two.root.glob("researcher.sqlite3*"):
        path.unlink()
    researcher, lead = two.researcher(), two.lead()
    with two.client() as alice:
        report = final(alice, lead, "r1")
        told = told_of(alice, lead)
    assert report["state"] == "completed", dump(report)
    assert sorted((t["status"], t["task"], t["error"]) for t in told) == [
        ("failed", "r1:1.0", "peer_lost"),
        ("failed", "r1:1.1", "peer_lost"),
    ], dump(told)
    assert all("(1 iterations)" in t["reason"] for t in told), dump(told)
    # The lead's own two calls, and one iteration of each lost child.
    assert report["tree_iterations"] == 4, dump(report)
    for key in ("input_tokens", "output_tokens"):
        assert report["tree_usage"][key] == report["usage"][key] + 2 * tokens[key], key


def notifications(
    client: httpx.Client, server: Server, task: str, into: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """``task``'s notifications, from now until the stream ends (after the task's end), as
    they come ``into`` a list (another thread's)."""
    seen: list[dict[str, Any]] = [] if into is None else into
    with client.stream("GET", f"{server.url}/v1/tasks/{task}/notifications") as answer:
        assert answer.status_code == 200, answer.read()
        for line in answer.iter_lines():
            if line.startswith("data: "):
                data = json.loads(line.removeprefix("data: "))
                seen.append(data if "event" in data else {"event": "snapshot"})
    return seen


def ends(seen: list[dict[str, Any]]) -> list[tuple[str, str, str, str | None]]:
    return [
        (d["event"], d["task"], d["agent"], d.get("end"))
        for d in seen
        if d["event"] in ("task_completed", "task_failed", "task_cancelled")
    ]


def test_a_parents_notifications_carry_its_remote_childrens_making_and_ends(
    pair: Callable[..., Pair],
) -> None:
    two = pair(slowed((0,), 3000))  # the lead's first call takes a while: subscribed by then
    researcher, lead = two.researcher(), two.lead()
    with two.client() as alice:
        assert alice.put(f"{lead.url}/v1/agents/lead/tasks/r1", json=REPORT).status_code == 201
        seen = notifications(alice, lead, "r1")
    made = [(d["child"], d["child_agent"]) for d in seen if d["event"] == "task_delegated"]
    assert made == [(c, "researcher") for c in CHILDREN], dump(seen)
    assigned = [
        (d["task"], d["agent"], d.get("parent")) for d in seen if d["event"] == "task_assigned"
    ]
    assert [a for a in assigned if a[0] != "r1"] == [(c, "researcher", "r1") for c in CHILDREN]
    assert sorted(ends(seen)) == [
        ("task_completed", "r1", "lead", None),
        ("task_completed", "r1:1.0", "researcher", "completed"),
        ("task_completed", "r1:1.1", "researcher", "completed"),
    ], dump(seen)
    assert ends(seen)[-1][:2] == ("task_completed", "r1")  # the stream ends with its own end
    check(two, lead, researcher)


def test_after_the_leads_restart_its_notifications_still_carry_its_remote_childrens_ends(
    pair: Callable[..., Pair],
) -> None:
    """The lead's runtime SIGKILLed while the children work: its new process made neither,
    and still tells r1's stream of their ends (it follows them). Their last calls take 20 s,
    so they end after the new process's stream is open."""
    script = slowed((1, 2), 2000)
    for index in (3, 4):
        script[index]["delay_ms"] = 20_000
    two = pair(script)
    researcher, lead = two.researcher(), two.lead()
    with two.client() as alice:
        assert alice.put(f"{lead.url}/v1/agents/lead/tasks/r1", json=REPORT).status_code == 201
    eventually(lambda: in_flight(two.model, 3), what="the children's calls in flight", timeout=60)
    kill(lead)
    lead = two.lead()
    with two.client() as alice:
        seen = notifications(alice, lead, "r1")
    assert sorted(ends(seen)) == [
        ("task_completed", "r1", "lead", None),
        ("task_completed", "r1:1.0", "researcher", "completed"),
        ("task_completed", "r1:1.1", "researcher", "completed"),
    ], dump(seen)
    check(two, lead, researcher)


def relayed(seen: list[dict[str, Any]], child: str) -> list[tuple[str, int | None]]:
    """The remote child's own events its parent's stream carried (relayed from its runtime)."""
    return [
        (d["event"], d.get("iteration"))
        for d in seen
        if d.get("remote") == "researcher" and d.get("task") == child and "end" not in d
    ]


# What each child does at the researcher, in order (those a relay may tell).
CHILD_EVENTS = [
    ("task_assigned", None),
    ("task_started", None),
    ("iteration_started", 1),
    ("iteration_completed", 1),
    ("iteration_started", 2),
    ("iteration_completed", 2),
]


def in_order(told: list[tuple[str, int | None]]) -> bool:
    """``told`` holds only what a child does, in the order it does it, nothing twice."""
    kept = [t for t in told if t in CHILD_EVENTS]
    return kept == sorted(set(kept), key=CHILD_EVENTS.index)


def test_a_parents_stream_carries_its_remote_childrens_own_events_once_across_its_restart(
    pair: Callable[..., Pair],
) -> None:
    """The children's first calls take 2 s, their second 15 s. A stream of r1 opened on the
    lead's first process hears each child's first iteration end and its second start, relayed
    from the researcher's runtime; the lead's runtime is SIGKILLed then, and a stream opened
    on its new process hears the second iterations end, then the children's ends: each event
    with the child's agent and id, in order, with a stable ``event_id``, none twice."""
    script = copy.deepcopy(STANDIN)
    script[0]["delay_ms"] = 3000  # subscribed before the lead delegates
    for index, delay in ((1, 2000), (2, 2000), (3, 15_000), (4, 15_000)):
        script[index]["delay_ms"] = delay
    two = pair(script)
    researcher, lead = two.researcher(), two.lead()
    before: list[dict[str, Any]] = []

    def read_until_killed() -> None:
        with two.client() as alice, contextlib.suppress(httpx.HTTPError):
            notifications(alice, lead, "r1", into=before)

    with two.client() as alice:
        assert alice.put(f"{lead.url}/v1/agents/lead/tasks/r1", json=REPORT).status_code == 201
    reader = threading.Thread(target=read_until_killed, daemon=True)
    reader.start()
    eventually(
        lambda: all(("iteration_started", 2) in relayed(list(before), c) for c in CHILDREN),
        what="the children's second iterations started, told on the lead's stream",
        timeout=90,
    )
    kill(lead)
    reader.join(timeout=30)
    assert not reader.is_alive()
    lead = two.lead()
    with two.client() as alice:
        after = notifications(alice, lead, "r1")
    for child in CHILDREN:
        assert ("iteration_completed", 1) in relayed(before, child), dump(before)
        assert ("iteration_completed", 2) in relayed(after, child), dump(after)
        assert in_order(relayed(before, child) + relayed(after, child)), dump([before, after])
        ends_ = [d for d in after if d.get("task") == child and "end" in d]
        assert [(d["event"], d["agent"], d["event_id"], d["remote"]) for d in ends_] == [
            ("task_completed", "researcher", f"{child}/end", "researcher")
        ], dump(after)
        own = [d for d in after if d.get("task") == child]
        assert own[-1] is ends_[0], dump(after)  # its end is the last of its events
    told = [d for d in before + after if d.get("remote") == "researcher"]
    assert {d["agent"] for d in told} == {"researcher"}
    assert all(
        d["event_id"].startswith(f"{d['task']}/{d['event']}/") for d in told if "end" not in d
    )
    ids = [d["event_id"] for d in told]
    assert len(ids) == len(set(ids)), dump(told)
    check(two, lead, researcher)


def test_a_peer_that_does_not_name_the_lead_among_its_delegators_refuses_its_children(
    pair: Callable[..., Pair],
) -> None:
    two = pair([STANDIN[0], STANDIN[-1]])  # the lead delegates, then reports what it has
    researcher, lead = two.researcher(delegators="team/someone-else"), two.lead()
    with two.client() as alice:
        assert alice.put(f"{lead.url}/v1/agents/lead/tasks/r1", json=REPORT).status_code == 201
        report = final(alice, lead, "r1")
        told = told_of(alice, lead)
    assert report["state"] == "completed", dump(report)
    assert [(t["status"], t["error"]) for t in told] == [("refused", "peer_refused")] * 2
    assert all("(403)" in t["reason"] and "ANKKA_DELEGATORS" in t["reason"] for t in told)
    assert report["tree_iterations"] == 2  # nothing was spent over there
    with two.client(LEAD) as as_lead:
        assert as_lead.get(f"{researcher.url}/v1/tasks/r1:1.0").status_code == 404


def test_a_remote_child_that_never_answers_in_time_is_told_past_its_deadline_and_cancelled(
    pair: Callable[..., Pair], jaeger_backend: Jaeger
) -> None:
    slow = [dict(STANDIN[i], delay_ms=30_000) for i in (1, 2)]  # the children's first calls
    two = pair([STANDIN[0], *slow, STANDIN[-1]])
    researcher = two.researcher(env=jaeger_backend.env("researcher"))
    lead = two.lead(
        target="tests.integration.delegation_services:service", env=jaeger_backend.env("lead")
    )
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    with two.client() as alice:
        answer = alice.put(
            f"{lead.url}/v1/agents/lead/tasks/r1",
            json=REPORT,
            headers={"traceparent": f"00-{trace_id}-{caller}-01"},
        )
        assert answer.status_code == 201, answer.text
        report = final(alice, lead, "r1")
        told = told_of(alice, lead)
    assert report["state"] == "completed", dump(report)  # the lead went on without them
    assert [(t["status"], t["task"]) for t in told] == [
        ("deadline_exceeded", "r1:1.0"),
        ("deadline_exceeded", "r1:1.1"),
    ], dump(told)
    assert all("no end within its deadline of 3 s" in t["reason"] for t in told)

    def cancelled_there() -> bool:
        with two.client(LEAD) as as_lead:
            records = [as_lead.get(f"{researcher.url}/v1/tasks/{c}").json() for c in CHILDREN]
        return all(r["cancel_requested"] or r["state"] == "cancelled" for r in records)

    eventually(cancelled_there, what="the children's cancel sent to their runtime", timeout=30)
    # The cancel is sent in the trace of the call that delegated the child, as its PUT was.
    delegate, cancel = "execute_tool delegate__researcher__summary", "POST /v1/tasks/{task}/cancel"

    def cancels_in_the_trace() -> bool:
        spans = jaeger_backend.spans(trace_id)
        calls = {s.span_id for s in spans if s.name == delegate and s.service == "lead"}
        cancels = [s for s in spans if s.name == cancel and s.service == "researcher"]
        assert len(calls) == 2 and {s.parent_id for s in cancels} == calls, (calls, cancels)
        return True

    eventually(cancels_in_the_trace, what="each child's cancel under its delegating call")
    jaeger_backend.trace(trace_id, names={delegate, cancel}, caller=caller)  # and no orphan


def test_a_remote_child_its_runtime_lost_after_making_it_fails_and_is_never_called_refused(
    pair: Callable[..., Pair],
) -> None:
    slow = [dict(STANDIN[i], delay_ms=60_000) for i in (1, 2)]  # cut off by the kill
    two = pair([STANDIN[0], *slow, STANDIN[-1]])
    researcher, lead = two.researcher(), two.lead()
    with two.client() as alice:
        assert alice.put(f"{lead.url}/v1/agents/lead/tasks/r1", json=REPORT).status_code == 201
    eventually(lambda: in_flight(two.model, 3), what="the children's calls in flight", timeout=60)
    kill(researcher)  # the children were made there; its store is then lost with it
    for path in two.root.glob("researcher.sqlite3*"):
        path.unlink()
    researcher = two.researcher()  # the same port, a new store: it knows no child (404)
    with two.client() as alice:
        report = final(alice, lead, "r1")
        told = told_of(alice, lead)
    assert report["state"] == "completed", dump(report)  # the lead went on without them
    assert sorted((t["status"], t["task"], t["error"]) for t in told) == [
        ("failed", "r1:1.0", "peer_lost"),
        ("failed", "r1:1.1", "peer_lost"),
    ], dump(told)
    assert all("with 404" in t["reason"] and "lost" in t["reason"] for t in told), dump(told)
    assert remote_rows(two.root / "lead.sqlite3") == [(c, "researcher", 1) for c in CHILDREN]
    with two.client(LEAD) as as_lead:
        assert as_lead.get(f"{researcher.url}/v1/tasks/r1:1.0").status_code == 404
