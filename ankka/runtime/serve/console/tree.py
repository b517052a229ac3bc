"""A task's tree on its console page: its parent, and its descendants to a bounded depth.

The same facts ``GET /v1/tasks/{task}`` answers (``parent``, ``children``, ``tree_usage``),
each child read as the API reads it (its record, with its place in its tree); a child another
runtime works has no record here, only its tree row (its agent, the peer, its end and the
spend its peer reported), so it is shown without a link. :func:`subtree` walks the tree through
the ``read`` it is given (the routes' one I/O), within bounds: :data:`MAX_DEPTH` levels below
the page's task, :data:`MAX_CHILDREN` children of each task, :data:`MAX_NODES` tasks in all;
what is left out is counted on a line "and N more" (on the child's own page, linked, when it
is a task here). :func:`tree_section` renders, every value escaped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from html import escape

from ankka.runtime.records.messages import Usage
from ankka.runtime.records.tasks import TaskRecord
from ankka.runtime.serve.console.pages import USAGE_HEAD, usage_cells
from ankka.runtime.store.tree_statements import TreeRow

__all__ = [
    "MAX_CHILDREN",
    "MAX_DEPTH",
    "MAX_NODES",
    "Node",
    "Parent",
    "RemoteChild",
    "remote_child",
    "subtree",
    "tree_section",
]

MAX_DEPTH = 4  # levels of descendants shown below the page's task
MAX_CHILDREN = 20  # children shown of each task
MAX_NODES = 100  # descendants shown in all (each is one read)


@dataclass(frozen=True, slots=True)
class RemoteChild:
    """A child another runtime works (``peer``: the name its peer is known by here)."""

    id: str
    agent: str
    peer: str
    type: str
    state: str
    reason: str | None
    usage: Usage  # its tree's, as its peer last reported it


@dataclass(frozen=True, slots=True)
class Node:
    """One descendant as its row shows it; ``peer`` is None for a task here (linked).
    ``readable``: whether the console's caller may read it (else only its id is shown)."""

    id: str
    agent: str = ""
    type: str = ""
    state: str = ""
    reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    peer: str | None = None
    readable: bool = True
    children: tuple[Node, ...] = ()
    more: int = 0  # its children not shown here (the bounds)


@dataclass(frozen=True, slots=True)
class Parent:
    """The page's task's parent: a task here (linked) or another runtime's."""

    id: str
    here: bool


def remote_child(row: TreeRow, shown: tuple[str, tuple[int, Usage]] | None) -> RemoteChild:
    """A remote child from its tree row and what :func:`remote_statements.shown` read of it:
    its end once its peer said it, else what its parent was told (a deadline), else working;
    its tree's usage once settled, else the peer's last report."""
    kind, (_, reported) = shown if shown is not None else ("", (0, Usage()))
    outcome = row.outcome
    state = row.end or (outcome.status if outcome is not None else "working")
    return RemoteChild(
        row.task,
        row.agent,
        row.remote or "",
        kind,
        state,
        outcome.reason if outcome is not None else None,
        row.tree_usage if row.settled else reported,
    )


Read = Callable[[str], Awaitable[TaskRecord | RemoteChild | None]]
Readable = Callable[[TaskRecord], bool]


def _state(record: TaskRecord) -> str:
    """Its state, with its typed end when that says more (``failed (budget_exhausted)``)."""
    state = record.state.value
    end = record.tree.end if record.tree is not None else None
    return f"{state} ({end})" if end and end != state else state


async def subtree(
    record: TaskRecord, read: Read, *, readable: Readable
) -> tuple[tuple[Node, ...], int]:
    """``record``'s children, each with its own, within the bounds, and how many of its
    children are left out. Depth first, each task's children counted against
    :data:`MAX_NODES` before any of theirs (so a deep first child cannot hide its siblings)."""
    budget = [MAX_NODES]

    async def children(of: TaskRecord, depth: int) -> tuple[tuple[Node, ...], int]:
        ids = of.tree.children if of.tree is not None else ()
        if depth > MAX_DEPTH:
            return (), len(ids)
        shown = ids[: min(MAX_CHILDREN, budget[0])]
        budget[0] -= len(shown)
        found = [(child, await read(child)) for child in shown]
        nodes = [await node(child, got, depth) for child, got in found]
        return tuple(nodes), len(ids) - len(shown)

    async def node(child: str, got: TaskRecord | RemoteChild | None, depth: int) -> Node:
        if isinstance(got, RemoteChild):
            return Node(
                got.id, got.agent, got.type, got.state, got.reason, got.usage, peer=got.peer
            )
        if got is None:  # made and not yet recorded here, or lost: its id is all there is
            return Node(child, state="unknown", readable=False)
        if not readable(got):
            return Node(child, readable=False)
        below, more = await children(got, depth + 1)
        return Node(
            got.id,
            got.spec.agent,
            got.spec.type,
            _state(got),
            got.reason,
            got.usage,
            children=below,
            more=more,
        )

    return await children(record, 1)


def _more(node: Node | None, count: int) -> str:
    if not count:
        return ""
    where = (
        f' (on <a href="/console/tasks/{escape(node.id)}">its page</a>)'
        if node is not None and node.peer is None
        else ""
    )
    return f'<li class="more muted" data-more="{count}">and {count} more{where}</li>'


def _item(node: Node) -> str:
    if not node.readable:
        said = "its state is not known here" if node.state == "unknown" else "not yours to read"
        return (
            f'<li data-child="{escape(node.id)}" data-readable="no">{escape(node.id)} '
            f'<span class="muted">({said})</span></li>'
        )
    shown = (
        f'<a href="/console/tasks/{escape(node.id)}">{escape(node.id)}</a>'
        if node.peer is None
        else f'{escape(node.id)} <span class="muted">(at {escape(node.peer)}, another '
        "runtime)</span>"
    )
    reason = f' · <span class="reason">{escape(node.reason)}</span>' if node.reason else ""
    usage = (
        f'<table class="usage"><thead><tr>{USAGE_HEAD}</tr></thead><tbody><tr>'
        f"{usage_cells(node.usage)}</tr></tbody></table>"
    )
    below = (
        f"<ul>{''.join(_item(c) for c in node.children)}{_more(node, node.more)}</ul>"
        if node.children or node.more
        else ""
    )
    return (
        f'<li data-child="{escape(node.id)}" data-state="{escape(node.state)}">{shown} · '
        f'<span class="agent">{escape(node.agent)}</span> · {escape(node.type or "-")} · '
        f'<span class="state">{escape(node.state)}</span>{reason}'
        f"{usage}{below}</li>"
    )


def tree_section(
    parent: Parent | None, children: tuple[Node, ...], more: int, tree_usage: Usage
) -> str:
    """The page's tree: its parent, its children (``more``: those left out) and its tree's
    usage (its own plus every descendant's)."""
    if parent is None:
        up = '<p id="parent">No parent: this task is its tree\'s root.</p>'
    elif parent.here:
        up = (
            f'<p id="parent">Parent: <a href="/console/tasks/{escape(parent.id)}">'
            f"{escape(parent.id)}</a></p>"
        )
    else:
        up = (
            f'<p id="parent">Parent: {escape(parent.id)} '
            '<span class="muted">(another runtime\'s task)</span></p>'
        )
    if children or more:
        down = f'<ul id="children">{"".join(_item(c) for c in children)}{_more(None, more)}</ul>'
    else:
        down = '<p class="empty" id="children">No children.</p>'
    usage = (
        f'<table id="tree-usage"><thead><tr><th></th>{USAGE_HEAD}<th>cost</th></tr></thead>'
        f"<tbody><tr><td>own and every descendant's</td>{usage_cells(tree_usage)}"
        "<td>unknown</td></tr></tbody></table>"
    )
    return f"<h2>Tree</h2>{up}<h3>Children</h3>{down}<h3>Tree tokens</h3>{usage}"
