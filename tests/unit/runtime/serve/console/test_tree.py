"""A task's tree on its console page is bounded (tests/integration/test_console_tree.py shows
it over real runtimes): at most MAX_CHILDREN children of a task, MAX_DEPTH levels, MAX_NODES
reads in all; what is left out is counted on an "and N more" line, linked to the page where
it is shown."""

from __future__ import annotations

import asyncio
import re

from ankka.runtime.records.delegation import TreeView
from ankka.runtime.records.messages import Usage
from ankka.runtime.records.tasks import TaskRecord, TaskSpec, TaskState
from ankka.runtime.serve.console.tree import (
    MAX_CHILDREN,
    MAX_DEPTH,
    MAX_NODES,
    Node,
    RemoteChild,
    subtree,
    tree_section,
)


def _record(task: str, children: tuple[str, ...] = (), *, creator: str = "alice") -> TaskRecord:
    return TaskRecord(
        task,
        TaskSpec("researcher", "summary", "x"),
        TaskState.COMPLETED,
        5,
        usage=Usage(1, 2),
        created_by=creator,
        tree=TreeView(children=children),
    )


def _walk(records: dict[str, TaskRecord | RemoteChild], root: str) -> tuple[tuple[Node, ...], int]:
    reads: list[str] = []

    async def read(task: str) -> TaskRecord | RemoteChild | None:
        reads.append(task)
        return records.get(task)

    root_record = records[root]
    assert isinstance(root_record, TaskRecord)
    found = asyncio.run(subtree(root_record, read, readable=lambda r: r.created_by == "alice"))
    assert len(reads) <= MAX_NODES
    return found


def _depth(nodes: tuple[Node, ...]) -> int:
    return 1 + max((_depth(n.children) for n in nodes if n.children), default=0)


def test_a_wide_task_shows_its_first_children_and_counts_the_rest() -> None:
    kids = tuple(f"c{i}" for i in range(MAX_CHILDREN + 7))
    records: dict[str, TaskRecord | RemoteChild] = {"r": _record("r", kids)}
    records.update({k: _record(k) for k in kids})
    nodes, more = _walk(records, "r")
    assert [n.id for n in nodes] == list(kids[:MAX_CHILDREN]) and more == 7
    html = tree_section(None, nodes, more, Usage())
    assert '<li class="more muted" data-more="7">and 7 more</li>' in html


def test_a_deep_chain_stops_at_the_depth_and_links_down() -> None:
    chain = [f"t{i}" for i in range(MAX_DEPTH + 3)]
    records: dict[str, TaskRecord | RemoteChild] = {
        t: _record(t, (chain[i + 1],) if i + 1 < len(chain) else ()) for i, t in enumerate(chain)
    }
    nodes, more = _walk(records, "t0")
    assert more == 0 and _depth(nodes) == MAX_DEPTH
    deepest = nodes[0]
    while deepest.children:
        deepest = deepest.children[0]
    assert deepest.id == chain[MAX_DEPTH] and deepest.more == 1
    html = tree_section(None, nodes, more, Usage())
    assert f'and 1 more (on <a href="/console/tasks/{chain[MAX_DEPTH]}">its page</a>)' in html


def test_a_bushy_tree_reads_at_most_max_nodes_and_counts_what_it_left_out() -> None:
    records: dict[str, TaskRecord | RemoteChild] = {}
    top = tuple(f"a{i}" for i in range(MAX_CHILDREN))
    records["r"] = _record("r", top)
    for a in top:
        below = tuple(f"{a}.{j}" for j in range(MAX_CHILDREN))
        records[a] = _record(a, below)
        records.update({b: _record(b) for b in below})
    nodes, _ = _walk(records, "r")  # _walk checks the reads
    shown = len(nodes) + sum(len(n.children) for n in nodes)
    left = sum(n.more for n in nodes)
    assert shown == MAX_NODES and shown + left == MAX_CHILDREN * (MAX_CHILDREN + 1)


def test_a_child_the_caller_may_not_read_shows_its_id_only_and_a_remote_one_no_link() -> None:
    remote = RemoteChild("r:1.1", "researcher", "peer<x>", "summary", "failed", "<b>", Usage())
    records: dict[str, TaskRecord | RemoteChild] = {
        "r": _record("r", ("r:1.0", "r:1.1")),
        "r:1.0": _record("r:1.0", creator="bob"),
        "r:1.1": remote,
    }
    nodes, _ = _walk(records, "r")
    html = tree_section(None, nodes, 0, Usage())
    assert '<li data-child="r:1.0" data-readable="no">r:1.0' in html
    assert "not yours to read" in html
    item = re.search(r'<li data-child="r:1.1".*?</li>', html, re.S)
    assert item is not None and "href" not in item.group(0)
    assert "peer&lt;x&gt;" in item.group(0) and "&lt;b&gt;" in item.group(0)
