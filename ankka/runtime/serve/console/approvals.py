"""The console's one write: a person approves or refuses a pending tool call, or answers an
MCP server's question (its form's fields, each as the schema types it; approve sends them,
refuse declines).

``GET /console/approvals`` lists the pending approvals (as ``GET /v1/approvals?state=pending``
shows them); each has a form that posts its decision with the digest it was shown, so the
decision goes through the same desk and the same digest check as the API's
``POST /v1/approvals/{id}``. The decider is the console's caller (:mod:`.access`), who must
hold the decide right over the session (:mod:`ankka.runtime.declare.policy`); the list shows only
the approvals of sessions it may read. A form posted from another site is refused: its
``Origin`` must be this server's, and its form token the one the page set (:mod:`.csrf`).
After a decision the person is taken to the session's page, which confirms it
(``?decided=ID``) and lists every decision of the session (who, what, when); a session waiting
for a decision shows its requests there with the same forms.

No view reads an unbounded window: the list is paged (:mod:`.listing`); a refused form's page
shows the newest pending page with its "older" link into the list; a session's page reads
that session's pending requests only (in the query, a page at a time); a question's form is
found by its id.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import parse_qs, quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ankka._kernel.errors import AnkkaError
from ankka.runtime.drivers.elicitations import ELICITATION
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.records.approvals import ApprovalDecided, Decision
from ankka.runtime.serve.console.csrf import FIELD, form_token, keep_token, token_matches
from ankka.runtime.serve.console.listing import PER_PAGE, Listing
from ankka.runtime.serve.console.pages import page, when
from ankka.runtime.store.approval_index import cursor_of
from ankka.runtime.store.readable import readers

__all__ = [
    "STATES",
    "approvals_answer",
    "approvals_page",
    "approvals_table",
    "decide_from_form",
    "decisions_section",
    "pending",
]

_DECISIONS: dict[str, Decision] = {"approve": "approved", "refuse": "refused"}
STATES = ("pending", "approved", "refused", "expired", "ended")
_MAX_FORM = 16 * 1024
_SESSION_PAGE = 500  # a session's pending rows read at once (its page reads every one)
# Where a refused form's page of pending approvals continues: the list, pending, older.
_PENDING = Listing("/console/approvals", (), {"state": "pending"})


def _decision(row: dict[str, Any], token: str) -> str:
    """A pending request's approve and refuse form (with the digest it shows and the browser's
    form ``token``), else what was decided and by whom."""
    state = str(row.get("state", "pending"))
    if state != "pending":
        by = f" by {escape(str(row['decided_by']))}" if row.get("decided_by") else ""
        return f"{escape(state)}{by}"
    return (
        f'<form method="post" action="/console/approvals/{escape(str(row["id"]))}">'
        f'<input type="hidden" name="digest" value="{escape(str(row["digest"]))}">'
        f'<input type="hidden" name="session" value="{escape(str(row.get("session", "")))}">'
        f'<input type="hidden" name="{FIELD}" value="{escape(token)}">{_fields(row)}'
        '<button name="decision" value="approve">approve</button> '
        '<button name="decision" value="refuse">refuse</button></form>'
    )


def _properties(row: dict[str, Any]) -> dict[str, Any]:
    """A server's question's form fields (none for a tool call)."""
    arguments = row.get("arguments")
    schema = arguments.get("requestedSchema") if isinstance(arguments, dict) else None
    found = schema.get("properties") if isinstance(schema, dict) else None
    return found if isinstance(found, dict) and row.get("kind") == "elicitation" else {}


def _fields(row: dict[str, Any]) -> str:
    """An input per field of a server's question (empty: the schema's default is sent)."""
    inputs = []
    for name, field in _properties(row).items():
        kind = field.get("type", "string") if isinstance(field, dict) else "string"
        default = field.get("default", "") if isinstance(field, dict) else ""
        inputs.append(
            f'<label>{escape(str(name))} ({escape(str(kind))}) <input name="field.'
            f'{escape(str(name))}" placeholder="{escape(str(default))}"></label> '
        )
    return "".join(inputs)


def form_content(form: dict[str, list[str]], properties: dict[str, Any]) -> dict[str, Any]:
    """The values typed into a question's form, as its schema's types (a value that does
    not convert is sent as typed, so the schema check names it); empty fields left out."""
    content: dict[str, Any] = {}
    for name, field in properties.items():
        typed = (form.get(f"field.{name}") or [""])[0].strip()
        if not typed:
            continue
        kind = field.get("type") if isinstance(field, dict) else None
        value: Any = typed
        try:
            if kind == "integer":
                value = int(typed)
            elif kind == "number":
                value = float(typed)
        except ValueError:
            pass
        if kind == "boolean":
            value = typed.lower() in ("true", "on", "yes", "1")
        content[str(name)] = value
    return content


def _expires(row: dict[str, Any]) -> str:
    value = row.get("expires_at")
    return when(datetime.fromisoformat(value)) if isinstance(value, str) else "-"


def approvals_table(rows: Sequence[dict[str, Any]], *, token: str) -> str:
    """The requests, each pending one with its approve and refuse form."""
    if not rows:
        return '<p class="empty">No tool call here.</p>'
    items = "".join(
        f'<tr data-approval="{escape(str(r["id"]))}" '
        f'data-state="{escape(str(r.get("state", "pending")))}">'
        f'<td><a href="/console/sessions/{escape(str(r.get("session", "")))}">'
        f"{escape(str(r.get('session', '')))}</a></td>"
        f"<td>{escape(str(r.get('agent', '')))}</td>"
        f"<td><code>{escape(str(r['tool']))}({escape(_arguments(r['arguments']))})</code></td>"
        f"<td>{_expires(r)}</td><td>{_decision(r, token)}</td></tr>"
        for r in rows
    )
    return (
        '<table id="approvals"><thead><tr><th>session</th><th>agent</th><th>call</th>'
        f"<th>expires</th><th>decision</th></tr></thead><tbody>{items}</tbody></table>"
    )


def approvals_page(
    rows: Sequence[dict[str, Any]],
    asked: Listing | None = None,
    *,
    token: str,
    cursor: str | None = None,
    problem: str = "",
) -> str:
    """One page of the approvals (newest first) ``asked``'s filters keep (without: the
    newest pending ones, as after a refused form, ``cursor`` continuing them in the list)."""
    shown = f'<p class="error" id="problem">{escape(problem)}</p>' if problem else ""
    table = approvals_table(rows, token=token)
    if asked is None:
        pager = _PENDING.pager(cursor=cursor, shown=len(rows))
        return page("approvals", f"<h1>Approvals</h1>{shown}{table}{pager}")
    pager = asked.pager(cursor=cursor, shown=len(rows))
    return page("approvals", f"<h1>Approvals</h1>{asked.form()}{shown}{table}{pager}")


def approvals_answer(
    request: Request,
    rows: Sequence[dict[str, Any]],
    headers: dict[str, str],
    asked: Listing | None = None,
    *,
    cursor: str | None = None,
    problem: str = "",
    status: int = 200,
) -> Response:
    """The approvals page as an answer, with the browser's form token set."""
    token = form_token(request)
    body = approvals_page(rows, asked, token=token, cursor=cursor, problem=problem)
    return keep_token(HTMLResponse(body, status_code=status, headers=headers), token)


def decisions_section(decided: Sequence[ApprovalDecided], *, confirm: str | None) -> str:
    """The decisions taken in a session (who, what, when), and, right after one was taken
    from this console (``?decided=ID``), a line confirming it."""
    banner = ""
    for d in decided:
        if d.approval == confirm:
            verb = "approved" if d.decision == "approved" else d.decision
            banner = (
                f'<p class="ok" id="confirmation">Recorded: {escape(d.approval)} {escape(verb)} '
                f"by {escape(d.decided_by)} at {escape(d.at.isoformat(timespec='seconds'))}.</p>"
            )
    if not decided:
        return banner
    rows = "".join(
        f'<tr data-decided="{escape(d.approval)}" data-decision="{escape(d.decision)}">'
        f"<td>{escape(d.approval)}</td><td>{escape(d.decision)}</td>"
        f"<td>{escape(d.decided_by)}</td><td>{escape(d.reason or '-')}</td>"
        f"<td>{escape(d.at.isoformat(timespec='seconds'))}</td></tr>"
        for d in decided
    )
    return (
        f'{banner}<h2>Decisions</h2><table id="decisions"><thead><tr><th>approval</th>'
        "<th>decision</th><th>by</th><th>reason</th><th>at</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _arguments(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


async def pending(runtime: Runtime, caller: str, *, session: str) -> list[dict[str, Any]]:
    """The pending approvals of ``session``, if ``caller`` may read it: every one, read a
    page at a time (a session's are its suspended turn's calls)."""
    index = runtime.approvals.index
    if index is None:
        return []
    found, after, who = [], None, readers(runtime.policy, caller)
    while True:
        rows = await index.find(
            session=session, state="pending", limit=_SESSION_PAGE, who=who, after=after
        )
        found += await runtime.questions.listed(rows, caller)
        if len(rows) < _SESSION_PAGE:
            return found
        after = cursor_of(rows[-1])


async def _pending_page(runtime: Runtime, caller: str) -> tuple[list[dict[str, Any]], str | None]:
    """The newest page of the pending approvals ``caller`` may read, and the cursor of the
    page after (None: there is none)."""
    index = runtime.approvals.index
    if index is None:
        return [], None
    rows = await index.find(
        state="pending", limit=PER_PAGE + 1, who=readers(runtime.policy, caller), newest=True
    )
    page_rows, cursor = _PENDING.cut(rows, cursor_of)
    return await runtime.questions.listed(page_rows, caller), cursor


async def _asked(runtime: Runtime, approval: str, caller: str) -> dict[str, Any]:
    """The question ``approval`` as ``caller`` is shown it (empty: not one it may read)."""
    index = runtime.approvals.index
    row = await index.get(approval) if index is not None else None
    shown = await runtime.questions.listed([row], caller) if row is not None else []
    return next((r for r in shown if r["id"] == approval), {})


async def _refused_form(
    runtime: Runtime,
    request: Request,
    caller: str,
    headers: dict[str, str],
    *,
    problem: str,
    status: int,
) -> Response:
    """The newest pending page, saying why the form was refused."""
    rows, cursor = await _pending_page(runtime, caller)
    return approvals_answer(request, rows, headers, cursor=cursor, problem=problem, status=status)


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    host = request.headers.get("host")
    return origin is not None and host is not None and origin == f"{request.url.scheme}://{host}"


async def decide_from_form(
    runtime: Runtime, request: Request, caller: str, headers: dict[str, str]
) -> Response:
    """Decide as ``caller`` (who must hold the decide right), from the console's own page."""
    raw = await request.body()
    form = parse_qs(raw[:_MAX_FORM].decode("utf-8", "replace")) if len(raw) <= _MAX_FORM else {}
    if not _same_origin(request) or not token_matches(request, (form.get(FIELD) or [""])[0]):
        return HTMLResponse(
            page(
                "refused",
                "<p>A decision is taken only from this console's own page: reload the page "
                "and decide there.</p>",
            ),
            status_code=403,
            headers=headers,
        )
    decision = (form.get("decision") or [""])[0]
    digest = (form.get("digest") or [""])[0]
    session = (form.get("session") or [""])[0]
    if decision not in _DECISIONS or not digest:
        problem = "the form needs a decision (approve or refuse) and the digest it was shown"
        return await _refused_form(runtime, request, caller, headers, problem=problem, status=400)
    approval = request.path_params["approval"]
    try:
        if approval.startswith(ELICITATION):  # a server's question: its form's values
            asked = await _asked(runtime, approval, caller)
            content = form_content(form, _properties(asked)) if decision == "approve" else None
            await runtime.questions.answer(
                approval,
                _DECISIONS[decision],
                digest,
                content=content,
                reason="",
                decided_by=caller,
                caller=caller,
            )
        else:
            await runtime.approvals.decide(
                approval, _DECISIONS[decision], digest, decided_by=caller, caller=caller
            )
    except AnkkaError as exc:  # a stale digest, a second decision, not permitted, unknown
        return await _refused_form(
            runtime, request, caller, headers, problem=str(exc), status=exc.status
        )
    # Back to the session, where the decision is shown and confirmed (else to the list).
    approval = quote(approval, safe="")
    where = (
        f"/console/sessions/{quote(session, safe='')}?decided={approval}"
        if session
        else "/console/approvals"
    )
    return RedirectResponse(where, status_code=303, headers=headers)
