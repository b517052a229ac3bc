"""The console shows a task's tree (issue 24, item 6): its parent, its children (id, agent,
type, state, reason, own usage) and its tree's usage, the same facts ``GET /v1/tasks/{task}``
answers. Over real ``ankka serve`` processes with the stand-in as the model: a lead whose
two children are local (one fails with a hostile reason, shown escaped; the page refused to a
caller who may not read the task), and a lead whose children another runtime works (shown
with their agent and peer, unlinked, and the child's page there naming its parent as another
runtime's).
"""

from __future__ import annotations

import copy
import html
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration import test_delegation_across as across
from tests.integration.conftest import Script
from tests.integration.tasks_crash import dump
from tests.integration.test_delegation import CHILDREN, REPORT, STANDIN
from tests.support.console_pages import element, figures
from tests.support.processes import Server

pytestmark = pytest.mark.integration

pair = across.pair  # two runtimes over mTLS, the lead's knowing the researcher's as a peer

HOSTILE = '<script>alert("tree")</script> & <b>bold</b>'
ALICE = {"authorization": "Bearer alice-token-0123456789"}
BOB = {"authorization": "Bearer bob-token-0123456789ab"}


def failing(contains: str, reason: str) -> dict[str, Any]:
    """A stand-in turn: a task whose instructions hold ``contains`` fails, saying ``reason``."""
    return {
        "when": "user",
        "call": 1,
        "contains": contains,
        "tool_calls": [{"name": "fail_task", "arguments": {"reason": reason}}],
        "usage": {"input_tokens": 170, "output_tokens": 12},
    }


def _script() -> list[dict[str, Any]]:
    """The team example's, the postgresql summary failing with :data:`HOSTILE` instead."""
    script: list[dict[str, Any]] = copy.deepcopy(STANDIN)
    sqlite_lookup, sqlite_done = script[1], script[3]
    sqlite_lookup["contains"] = sqlite_done["contains"] = "Summarise sqlite."
    fails = failing("Summarise postgresql.", HOSTILE)
    return [script[0], sqlite_lookup, fails, sqlite_done, script[5]]


def _child_item(page: str, child: str) -> str:
    return element(page, "li data-child", child, "</table>")


def _usage(item: str) -> dict[str, int]:
    return figures(item, "data-usage")


def test_a_tasks_page_shows_its_children_as_the_api_reads_them_escaped_and_only_to_readers(
    standin: Callable[[Script], Server], serve: Callable[..., Server], tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("alice alice-token-0123456789\nbob bob-token-0123456789ab\n")
    server = serve(
        standin(_script()).url,
        target="examples.team:service",
        args=("--token-file", str(tokens)),
        env={"ANKKA_CONSOLE": "on"},
    )
    put = httpx.put(f"{server.url}/v1/agents/lead/tasks/r1", json=REPORT, headers=ALICE, timeout=30)
    assert put.status_code == 201, put.text
    url = f"{server.url}/v1/tasks"
    lead = httpx.get(f"{url}/r1", params={"wait": 60}, headers=ALICE, timeout=90).json()
    assert lead["state"] == "completed" and lead["children"] == CHILDREN, dump(lead)
    children = {c: httpx.get(f"{url}/{c}", headers=ALICE).json() for c in CHILDREN}
    assert sorted(c["state"] for c in children.values()) == ["completed", "failed"]

    page = httpx.get(f"{server.url}/console/tasks/r1", headers=ALICE)
    assert page.status_code == 200, page.text
    text = page.text
    assert "No parent: this task is its tree's root." in text
    assert re.findall(r'<li data-child="([^"]+)"', text) == CHILDREN  # in the order made
    for child, record in children.items():
        item = _child_item(text, child)
        assert f'<a href="/console/tasks/{child}">{child}</a>' in item
        assert f'data-state="{record["state"]}"' in item
        assert '<span class="agent">researcher</span> · summary' in item
        assert _usage(item) == record["usage"]  # its own usage
    failed = next(c for c, r in children.items() if r["state"] == "failed")
    assert children[failed]["reason"] == HOSTILE
    assert HOSTILE not in text and "<script>alert" not in text  # escaped, never markup
    assert html.escape(HOSTILE) in _child_item(text, failed)
    tree = re.search(r'<table id="tree-usage">.*?</table>', text, re.S)
    assert tree is not None and _usage(tree.group(0)) == lead["tree_usage"]
    assert lead["tree_usage"] != lead["usage"]  # the children's are in it

    child = httpx.get(f"{server.url}/console/tasks/{failed}", headers=ALICE).text
    assert '<p id="parent">Parent: <a href="/console/tasks/r1">r1</a></p>' in child
    assert '<p class="empty" id="children">No children.</p>' in child

    for task in ("r1", failed):  # bob may read neither, through the console either
        refused = httpx.get(f"{server.url}/console/tasks/{task}", headers=BOB)
        assert refused.status_code == 403, refused.text
        assert "may not read task" in refused.text and "researcher" not in refused.text


def test_children_another_runtime_works_are_shown_with_their_agent_and_no_link(
    pair: Callable[..., across.Pair],
) -> None:
    two = pair()
    researcher = two.researcher(env={"ANKKA_CONSOLE": "on"})
    lead = two.lead(env={"ANKKA_CONSOLE": "on"})
    with two.client() as alice:
        answer = alice.put(f"{lead.url}/v1/agents/lead/tasks/r1", json=REPORT)
        assert answer.status_code == 201, answer.text
        report = across.final(alice, lead, "r1")
        assert report["state"] == "completed", dump(report)
        page = alice.get(f"{lead.url}/console/tasks/r1").text
    assert re.findall(r'<li data-child="([^"]+)"', page) == CHILDREN
    for child in CHILDREN:
        item = _child_item(page, child)
        assert f'{child} <span class="muted">(at researcher, another runtime)</span>' in item
        assert "href=" not in item  # its page is not here
        assert '<span class="agent">researcher</span> · summary' in item
        assert 'data-state="completed"' in item
    with two.client(across.LEAD) as as_lead:  # the children are the lead runtime's there
        remote = {c: across.final(as_lead, researcher, c) for c in CHILDREN}
        shown = as_lead.get(f"{researcher.url}/console/tasks/{CHILDREN[0]}").text
    for child, record in remote.items():  # the tree usage its peer reported, as it is there
        assert _usage(_child_item(page, child)) == record["tree_usage"]
    tree = re.search(r'<table id="tree-usage">.*?</table>', page, re.S)
    assert tree is not None and _usage(tree.group(0)) == report["tree_usage"]
    assert 'Parent: r1 <span class="muted">(another runtime\'s task)</span>' in shown
