"""The console shows a team's backlog (who claimed what, how long ago) and a moderated
conversation with its speakers (issue 25, item 4). Over a real ``ankka serve
examples.newsroom:service`` with two callers (a token file) and the stand-in as the model:
each caller's backlog page holds its own items only, with counts by state, claims, ends,
dependencies and reasons as ``GET /v1/teams/{team}/items`` answers them; a standup's session
page shows each speaker's turn, the silent one skipped with why, and the end's reason; hostile
text is escaped, and a caller who may not read the conversation is refused it.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script
from tests.integration.test_console_tree import failing
from tests.support.console_pages import element, figures
from tests.support.processes import REPO, Server

pytestmark = pytest.mark.integration

STANDIN: list[dict[str, Any]] = json.loads(
    (REPO / "examples" / "newsroom-standin.json").read_text()
)
HOSTILE = "<img src=x onerror=alert('team')> & co"
TOKENS = "alice alice-token-0123456789\nbob bob-token-0123456789ab\n"
ALICE = {"authorization": "Bearer alice-token-0123456789"}
BOB = {"authorization": "Bearer bob-token-0123456789ab"}


@pytest.fixture
def newsroom(
    serve: Callable[..., Server], standin: Callable[[Script], Server], tmp_path: Path
) -> Callable[[Script], Server]:
    def make(script: Script) -> Server:
        tokens = tmp_path / "tokens"
        tokens.write_text(TOKENS)
        return serve(
            standin(script).url,
            target="examples.newsroom:service",
            args=("--token-file", str(tokens)),
            env={"ANKKA_CONSOLE": "on"},
        )

    return make


def _put(server: Server, item: str, body: dict[str, Any], who: dict[str, str]) -> None:
    answer = httpx.put(
        f"{server.url}/v1/teams/newsroom/items/{item}", json=body, headers=who, timeout=30
    )
    assert answer.status_code == 201, answer.text


def _final(server: Server, item: str, who: dict[str, str]) -> dict[str, Any]:
    answer = httpx.get(
        f"{server.url}/v1/teams/newsroom/items/{item}",
        params={"wait": 60},
        headers=who,
        timeout=90,
    )
    record: dict[str, Any] = answer.json()
    assert record["state"] in ("completed", "failed", "cancelled"), record
    return record


def _row(page: str, item: str) -> str:
    return element(page, "tr data-item", item, "</tr>")


def _counts(page: str) -> dict[str, int]:
    return figures(page, "data-count")


def test_each_callers_backlog_page_shows_its_items_claims_counts_and_reasons(
    newsroom: Callable[[Script], Server],
) -> None:
    summary, done = (dict(STANDIN[0]), dict(STANDIN[1]))
    summary["contains"] = done["contains"] = "Summarise sqlite."
    server = newsroom([summary, done, failing("Summarise postgresql.", HOSTILE)])
    _put(server, "sqlite", {"type": "summary", "instructions": "Summarise sqlite."}, ALICE)
    _put(server, "pg", {"type": "summary", "instructions": "Summarise postgresql."}, ALICE)
    draft = {"type": "draft", "instructions": "Write up postgresql.", "depends_on": ["pg"]}
    _put(server, "draft-1", draft, ALICE)
    items = {i: _final(server, i, ALICE) for i in ("sqlite", "pg", "draft-1")}
    _put(server, "b1", {"type": "summary", "instructions": "Summarise mysql."}, BOB)
    bobs = _final(server, "b1", BOB)  # nothing scripted for it: the stand-in refuses, it fails

    page = httpx.get(f"{server.url}/console/teams/newsroom", headers=ALICE)
    assert page.status_code == 200, page.text
    text = page.text
    assert re.findall(r'<tr data-item="([^"]+)"', text) == ["sqlite", "pg", "draft-1"]
    assert _counts(text) == {
        "waiting": 0, "ready": 0, "claimed": 0, "completed": 1, "failed": 1, "cancelled": 1,
    }  # fmt: skip
    for item, record in items.items():
        row = _row(text, item)
        assert f'data-state="{record["state"]}"' in row
        assert f'ended <time datetime="{record["updated_at"]}">' in row
        assert f'<td class="reason">{html.escape(record["reason"] or "-")}</td>' in row
        assert f'<a href="/console/tasks/{record["task"]}">' in row
    sqlite = items["sqlite"]["claimed_by"]
    assert sqlite["agent"] == "researcher"
    assert (
        f'<span class="agent">researcher</span> <span class="instance">{sqlite["instance"]}'
        in _row(text, "sqlite")
    )
    assert "<td>pg</td>" in _row(text, "draft-1")  # what it depends on
    assert items["pg"]["reason"] == HOSTILE and HOSTILE not in text
    assert "<img src=x" not in text and html.escape(HOSTILE) in _row(text, "pg")
    assert "b1" not in text  # bob's item is bob's

    theirs = httpx.get(f"{server.url}/console/teams/newsroom", headers=BOB).text
    assert re.findall(r'<tr data-item="([^"]+)"', theirs) == ["b1"]
    assert _counts(theirs)[bobs["state"]] == 1 and sum(_counts(theirs).values()) == 1
    assert "sqlite" not in theirs and HOSTILE not in theirs

    index = httpx.get(f"{server.url}/console/teams", headers=ALICE).text
    assert '<a href="/console/teams/newsroom">newsroom</a>' in index
    assert '<li data-conversation="standup">standup: editor, researcher, writer</li>' in index
    assert 'href="/console/teams"' in httpx.get(f"{server.url}/console", headers=ALICE).text
    missing = httpx.get(f"{server.url}/console/teams/sports", headers=ALICE)
    assert missing.status_code == 404 and "sports" in missing.text


def test_a_standups_session_page_shows_each_speaker_the_skipped_turn_and_the_end(
    newsroom: Callable[[Script], Server],
) -> None:
    editor, _, writer = STANDIN[3:]
    script = [{**editor, "text": HOSTILE}, {"when": "user", "call": 1, "text": ""}, writer]
    server = newsroom(script)
    answer = httpx.post(
        f"{server.url}/v1/conversations/standup/sessions/monday",
        json={"message": "Good morning."},
        headers=ALICE,
        timeout=120,
    )
    assert answer.status_code == 200, answer.text
    run = answer.json()
    assert [t["speaker"] for t in run["turns"]] == ["editor", "writer"]
    assert [(s["speaker"], s["reason"]) for s in run["skipped"]] == [
        ("researcher", "speaker_silent")
    ]

    page = httpx.get(f"{server.url}/console/sessions/conversation:standup:monday", headers=ALICE)
    assert page.status_code == 200, page.text
    section = page.text[page.text.index('<div id="conversation">') :]
    steps = re.findall(r'<li class="(spoke|skipped)" data-speaker="([^"]+)"', section)
    assert steps == [("spoke", "editor"), ("skipped", "researcher"), ("spoke", "writer")]
    assert 'data-reason="speaker_silent"' in section
    assert run["skipped"][0]["detail"] in html.unescape(section)
    assert f'<span class="msg">{html.escape(writer["text"])}</span>' in section
    assert HOSTILE not in page.text and html.escape(HOSTILE) in section
    ended = re.search(r'<p class="ended" data-reason="([^"]+)"', section)
    assert ended is not None and ended.group(1) == run["ended"]["reason"] == "max_turns"
    assert html.escape(run["ended"]["detail"]) in section
    assert "Good morning." in section  # the message it answered

    refused = httpx.get(f"{server.url}/console/sessions/conversation:standup:monday", headers=BOB)
    assert refused.status_code == 403, refused.text
    assert "editor" not in refused.text and "Good morning" not in refused.text
