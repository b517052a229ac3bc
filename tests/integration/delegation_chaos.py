"""What the delegation chaos harness needs (tests/integration/test_delegation_chaos.py): random
trees and the stand-in script that plays them, a reading of the store taken with every runtime
stopped, the crash windows of docs/delegation.md found in such a reading, and the invariants
checked on the store and the stand-in's request log once every root has ended."""

from __future__ import annotations

import json
import random
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.tasks_crash import Key, asked_keys

__all__ = [
    "WINDOWS",
    "Node",
    "Reading",
    "check_invariants",
    "plan_trees",
    "read_store",
    "script",
    "tool_runs",
    "windows",
]

FINAL = frozenset({"completed", "failed", "cancelled"})
MAX_DEPTH = 3
MAX_FAN_OUT = 4
COPIES = 4  # each model turn this many times: a call cut off by a kill is asked again

WINDOWS = {
    1: "the answer with the delegation calls recorded, a child not yet created",
    2: "a child created (and its grant reserved), not yet started",
    3: "a child in the middle of an iteration (its model call in flight, or its tools running)",
    4: "a child ended (its outcome set), its result not yet in the parent's journal",
    5: "some of an answer's results recorded, others not",
    6: "every result recorded, the parent's next model call not yet recorded",
    7: "a parent ended with descendants at work (the subtree's cancellation): its cancel "
    "asked for and its descendants still at work, or a descendant ended with it while its "
    "model call was in flight",
}


@dataclass
class Node:
    id: str
    depth: int
    children: list[str] = field(default_factory=list)
    fails: bool = False
    usage: tuple[tuple[int, int], tuple[int, int]] = ((0, 0), (0, 0))
    delays: tuple[int, int] = (0, 0)


def plan_trees(rng: random.Random, roots: list[str], max_tasks: int) -> dict[str, Node]:
    """A tree under each root: depth ≤ 3, fan-out ≤ 4, at most ``max_tasks`` tasks, about a
    quarter of its tasks failing. A child of task ``P`` delegated in ``P``'s first model call
    is ``P:1.k`` (docs/delegation.md: the call's position in that answer)."""
    nodes: dict[str, Node] = {}
    for root in roots:
        frontier = [Node(root, 0)]
        count = 1
        while frontier:
            node = frontier.pop(0)
            nodes[node.id] = node
            node.fails = rng.random() < 0.25
            node.usage = tuple(  # type: ignore[assignment]
                (rng.randint(10, 99), rng.randint(1, 20)) for _ in range(2)
            )
            room = max_tasks - count
            if node.depth < MAX_DEPTH and room > 0:
                fan_out = rng.choice([0, 1, 2, 2, 3, 4])
                for k in range(min(fan_out, room)):
                    child = Node(f"{node.id}:1.{k}", node.depth + 1)
                    node.children.append(child.id)
                    frontier.append(child)
                    count += 1
            # A parent's call after its children's results is slower: window 6 is its time.
            after = rng.randint(400, 1000) if node.children else rng.randint(50, 600)
            node.delays = (rng.randint(50, 600), after)
    return nodes


def _turns(node: Node) -> list[dict[str, Any]]:
    marker = f"Task {node.id} (type"
    delegate = f"delegate__l{node.depth + 1}__job"
    first = [
        {"name": delegate, "arguments": {"instructions": f"Part {k} of {node.id}."}}
        for k in range(len(node.children))
    ]
    first.append({"name": "lookup", "arguments": {"topic": node.id}})
    if node.fails:
        end = {"name": "fail_task", "arguments": {"reason": f"{node.id} failed, as planned"}}
    else:
        end = {"name": "complete_task", "arguments": {"note": f"{node.id} done"}}
    return [
        {
            "contains": marker,
            "call": number + 1,
            "tool_calls": calls,
            "usage": {
                "input_tokens": node.usage[number][0],
                "output_tokens": node.usage[number][1],
            },
            "delay_ms": node.delays[number],
        }
        for number, calls in enumerate([first, [end]])
    ]


def script(nodes: dict[str, Node]) -> list[dict[str, Any]]:
    return [turn for node in nodes.values() for turn in _turns(node) * COPIES]


@dataclass
class Reading:
    """What the store holds, read while no runtime runs."""

    tasks: dict[str, dict[str, Any]]
    tree: dict[str, dict[str, Any]]
    events: dict[str, list[tuple[str, dict[str, Any]]]]  # task → (kind, body), in order


def _query(store: str, sql: str) -> list[dict[str, Any]]:
    if store.startswith("postgresql://"):
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(store, row_factory=dict_row) as conn:
            return list(conn.execute(sql.replace("{events}", "ankka_events")).fetchall())
    with sqlite3.connect(store.removeprefix("sqlite:///")) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute(sql.replace("{events}", "events")).fetchall()]


def read_store(store: str, prefix: str) -> Reading:
    """The tasks whose ids start with ``prefix`` (letters and digits only), their tree rows
    and their sessions."""
    assert prefix.isalnum(), prefix
    where = f"LIKE '{prefix}%'"
    tasks = {r["id"]: r for r in _query(store, f"SELECT * FROM ankka_tasks WHERE id {where}")}
    tree = {
        r["task"]: r for r in _query(store, f"SELECT * FROM ankka_task_tree WHERE task {where}")
    }
    events: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    rows = _query(
        store,
        "SELECT session, kind, body FROM {events} "
        f"WHERE session LIKE 'task:{prefix}%' ORDER BY session, seq",
    )
    for row in rows:
        body = json.loads(row["body"])
        events.setdefault(row["session"].removeprefix("task:"), []).append((row["kind"], body))
    return Reading(tasks, tree, events)


def _answers(reading: Reading, task: str) -> list[tuple[list[dict[str, Any]], set[str]]]:
    """Each recorded answer of ``task``: its tool calls and the ids of those with a result."""
    answers: list[tuple[list[dict[str, Any]], set[str]]] = []
    for kind, body in reading.events.get(task, []):
        if kind == "assistant_message":
            answers.append((list(body.get("tool_calls") or []), set()))
        elif kind == "tool_result" and answers:
            answers[-1][1].add(str(body.get("call_id")))
    return answers


def _live(reading: Reading, task: str) -> bool:
    row = reading.tasks.get(task)
    return row is not None and row["state"] not in FINAL


def windows(reading: Reading, asked: set[str] | None = None) -> set[int]:
    """The crash windows the store was in when read (``asked``: the tasks whose model call
    the stand-in had received and not yet answered, when known)."""
    found: set[int] = set()
    in_flight = asked or set()
    children_by_call = {
        (row["parent"], row["call"]): task for task, row in reading.tree.items() if row["parent"]
    }
    for task in reading.tasks:
        answers = _answers(reading, task)
        live = _live(reading, task)
        row = reading.tree.get(task, {})
        if row.get("parent"):
            started = bool(reading.tasks[task]["started"])
            if live and not started:
                found.add(2)
            working = answers and any(
                c["name"] == "lookup" and c["id"] not in answers[-1][1] for c in answers[-1][0]
            )
            # Started, its first answer not recorded: its first model call in flight.
            if live and started and (task in in_flight or working or not answers):
                found.add(3)
            if not live and task in in_flight:
                found.add(7)  # ended while its call is in flight: it runs none of the answer
        below = [d for d in reading.tasks if d.startswith(f"{task}:")]
        if (
            live
            and reading.tasks[task]["cancel_requested"]
            and any(_live(reading, d) for d in below)
        ):
            found.add(7)  # its cancellation asked for, its subtree still at work
        if not live or not answers:
            continue
        calls, answered = answers[-1]
        delegated = [c for c in calls if c["name"].startswith("delegate__")]
        if not delegated:
            continue
        if any(
            (task, c["id"]) not in children_by_call and c["id"] not in answered for c in delegated
        ):
            found.add(1)
        for c in delegated:
            child = children_by_call.get((task, c["id"]))
            if child and reading.tree[child]["outcome"] and c["id"] not in answered:
                found.add(4)
        if answered and len(answered) < len(calls):
            found.add(5)
        if len(answered) == len(calls):
            found.add(6)  # its next call not recorded (perhaps in flight)
    return found


def tool_runs(log: Path) -> Counter[str]:
    return Counter(log.read_text().splitlines()) if log.exists() else Counter()


def _usage(text: str | dict[str, Any]) -> dict[str, int]:
    data = json.loads(text) if isinstance(text, str) else text
    return {k: int(v) for k, v in data.items() if isinstance(v, int)}


def check_invariants(
    reading: Reading,
    nodes: dict[str, Node],
    roots: list[str],
    requests: list[dict[str, Any]],
    recorded_at_kills: list[tuple[int, set[Key]]],
    runs: Counter[str],
) -> Counter[str]:
    """Every invariant of issue 24's chaos harness, on the store read after the last root
    ended; answers counts of what was checked."""
    counts: Counter[str] = Counter()
    # Every root ends.
    for root in roots:
        assert reading.tasks[root]["state"] in FINAL, (root, reading.tasks[root])
        counts[f"roots {reading.tasks[root]['state']}"] += 1
    # Each child is created once, and only a planned one: the tree's rows are exactly the
    # children the parents' recorded answers delegated, each under the call that made it.
    made: Counter[tuple[str, str]] = Counter()
    for task, row in reading.tree.items():
        if row["parent"]:
            made[(row["parent"], row["call"])] += 1
            assert task in nodes and task in nodes[row["parent"]].children, task
            assert task in reading.tasks, f"a tree row with no task: {task}"
    for task in reading.tasks:
        if task not in nodes:
            continue
        for calls, _answered in _answers(reading, task):
            for c in calls:
                if c["name"].startswith("delegate__"):
                    key = (task, c["id"])
                    if made[key] == 0:  # only a task cancelled before it made it
                        state = reading.tasks[task]["state"]
                        assert state == "cancelled", (
                            f"{task} ({state}) never made {c['id']}'s child"
                        )
                    counts["children"] += made[key]
    assert all(n == 1 for n in made.values()), [k for k, n in made.items() if n != 1]
    # No child result lost or delivered twice: each ended child whose parent is still waiting
    # for it, or ended since, has exactly one result for its call in the parent's journal.
    for task, row in reading.tree.items():
        parent = row["parent"]
        if not parent:
            continue
        delivered = [
            body
            for kind, body in reading.events.get(parent, [])
            if kind == "tool_result" and body.get("call_id") == row["call"]
        ]
        assert len(delivered) <= 1, (task, delivered)
        if reading.tasks[parent]["state"] == "completed" or reading.tasks[parent]["state"] == (
            "failed"
        ):
            assert len(delivered) == 1, f"{task}'s result never reached {parent}"
            told = json.loads(delivered[0]["content"])
            assert told["task"] == task and told["status"] == reading.tasks[task]["state"], (
                task,
                told,
                reading.tasks[task]["state"],
            )
            counts["child results delivered"] += 1
        assert reading.tasks[task]["state"] in FINAL, f"{task} outlived its root"
    # No recorded model call made again: a call recorded before a kill is never asked after it.
    keys = asked_keys(requests)
    for index, recorded in recorded_at_kills:
        again = sorted(set(keys[index:]) & recorded)
        asks = [
            (n, r["received"], r["answered"])
            for n, (k, r) in enumerate(zip(keys, requests, strict=True))
            if k in again
        ]
        assert again == [], (
            f"recorded model calls asked again after the kill at request {index}: {again[:10]}; "
            f"each ask (request, received, answered): {asks}"
        )
    final_keys = recorded_keys_of(reading)
    assert final_keys <= set(keys), "a recorded answer the stand-in never gave"
    counts["model calls recorded"] = len(final_keys)
    counts["model calls asked"] = len(keys)
    # Tools run at least once: every lookup call whose result is recorded ran.
    for task in reading.tasks:
        for calls, answered in _answers(reading, task):
            for c in calls:
                if c["name"] == "lookup" and c["id"] in answered:
                    assert runs[json.loads(c["arguments"])["topic"]] >= 1, task
                    counts["tool calls"] += 1
    counts["tool runs"] = sum(runs.values())
    # tree_usage is the sum of the tree's own usages (read over HTTP by the caller too).
    for task, row in reading.tree.items():
        own = _subtree_usage(reading, task)
        tree = {
            "input_tokens": int(row["tree_input"]),
            "output_tokens": int(row["tree_output"]),
        }
        assert {k: own.get(k, 0) for k in tree} == tree, (task, own, tree)
    return counts


def _subtree_usage(reading: Reading, task: str) -> dict[str, int]:
    total = Counter(_usage(reading.tasks[task]["usage"]))
    for child, row in reading.tree.items():
        if row["parent"] == task and child in reading.tasks:
            total.update(_subtree_usage(reading, child))
    return dict(total)


def recorded_keys_of(reading: Reading) -> set[Key]:
    """tasks_crash.recorded_keys's rule, on a reading: the request behind each recorded answer."""
    keys: set[Key] = set()
    for task, events in reading.events.items():
        count = 0
        for kind, _ in events:
            if kind == "assistant_message":
                keys.add((task, count))
            if kind in ("user_message", "assistant_message", "tool_result"):
                count += 1
    return keys
