"""The team and conversation routes. Thin: parse, ask the team host or the conversations,
render (docs/http-api.md, "Teams" and "Conversations").

- ``PUT /v1/teams/{team}/items/{item}`` ``{"type", "instructions", "depends_on"?,
  "assignee"?, "priority"?}`` → 201 with the item (200 when the same body was sent before,
  409 when a different one was);
- ``GET /v1/teams/{team}/items/{item}`` (``?wait=S`` holds up to S seconds until it is
  final), ``GET /v1/teams/{team}/items``, ``POST /v1/teams/{team}/items/{item}/cancel``,
  ``POST /v1/teams/{team}/items/{item}/priority`` ``{"priority"}``;
- ``POST /v1/teams/{team}/messages`` ``{"to", "kind", "text", "id"?}`` → 201 with the message
  (200 when the same one was sent under its id before, 409 when a different one was);
  ``GET /v1/teams/{team}/messages?limit=&cursor=``: a page of the messages the caller may
  read, in the order sent;
- ``POST /v1/conversations/{conversation}/sessions/{session}`` ``{"message"}`` runs the
  moderated conversation to its end (with ``Accept: text/event-stream``, its turns streamed
  as they are recorded: :mod:`.conversation_stream`).

An item is its creator's, the platform's and whoever the lead's access names, as a task is
its creator's (:mod:`ankka.runtime.declare.policy`): the team host checks the caller on every
one of these (:meth:`TeamHost.permitted`), as it checks a lead's task's creator on its
backlog tools.
"""

from __future__ import annotations

import uuid
from collections import Counter
from functools import partial
from typing import Annotated, Any

from fastapi import FastAPI, Path, Query
from starlette.requests import Request
from starlette.responses import Response

from ankka._kernel.drain import cut_by_shutdown
from ankka.runtime.drivers.teams.backlog import TeamHost
from ankka.runtime.drivers.teams.conversation import Conversations, CutCause
from ankka.runtime.records.tasks import MAX_ID, check_id
from ankka.runtime.serve.api import errors
from ankka.runtime.serve.conversation_stream import stream_run, streamed, wants_events
from ankka.runtime.serve.identity import caller_of
from ankka.runtime.serve.tasks_http import Wait
from ankka.runtime.serve.teams_wire import (
    ConversationBody,
    ConversationRun,
    ItemBody,
    ItemListing,
    MessageBody,
    MessagePage,
    PriorityBody,
)
from ankka.runtime.serve.teams_wire import Item as ItemWire
from ankka.runtime.serve.teams_wire import Message as MessageWire
from ankka.runtime.store import team_message_statements as channel
from ankka.runtime.store.readable import BadCursor, decode_cursor, encode_cursor
from ankka.runtime.store.team_statements import Item
from ankka.runtime.store.team_statements import ItemBody as StoredBody

__all__ = ["add_conversation_routes", "add_team_routes", "item_json", "message_json"]

_ANY = (401, 403, 413, 422, 503)
_IDS = f"1 to {MAX_ID} letters, digits, '_', '.', ':' or '-', starting with a letter or digit"
TeamName = Annotated[str, Path(description="a team this service declares", max_length=MAX_ID)]
ItemId = Annotated[str, Path(description=_IDS, min_length=1, max_length=MAX_ID)]
Name = Annotated[str, Path(description="a conversation this service declares", max_length=MAX_ID)]
SessionId = Annotated[str, Path(description=_IDS, min_length=1, max_length=MAX_ID)]
MAX_PAGE = 500  # messages a page answers at most
Limit = Annotated[
    int, Query(ge=1, le=MAX_PAGE, description=f"at most this many a page (1 to {MAX_PAGE})")
]
PageCursor = Annotated[
    str | None,
    Query(max_length=2048, description="the previous answer's next: the page after it"),
]


def message_json(message: channel.Message) -> dict[str, Any]:
    return message.as_dict()


def _after(cursor: str | None) -> int:
    """The ``seq`` a page starts after: 0 for the first page."""
    if cursor is None:
        return 0
    seq, _ = decode_cursor(cursor)
    if not seq.isdigit():
        raise BadCursor(
            "?cursor= is not a cursor this runtime gave: pass the 'next' of the previous "
            "answer unchanged (or leave it out for the first page)"
        )
    return int(seq)


def item_json(item: Item) -> dict[str, Any]:
    claimed = item.claimed_by
    return {
        "id": item.id,
        "type": item.body.type,
        "state": item.state,
        "claimed_by": {"agent": claimed[0], "instance": claimed[1]} if claimed else None,
        "result": item.result,
        "reason": item.reason,
        "team": item.team,
        "task": item.task,
        "instructions": item.body.instructions,
        "depends_on": list(item.body.depends_on),
        "assignee": item.body.assignee,
        "priority": item.priority,
        "claims": item.claims,
        "claimed_at": item.claimed_at.isoformat() if item.claimed_at else None,
        "created_by": item.created_by,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }


def add_team_routes(app: FastAPI, host: TeamHost) -> None:
    @app.put(
        "/v1/teams/{team}/items/{item}",
        operation_id="put_team_item",
        summary="Add an item to a team's backlog (again: the same body changes nothing)",
        status_code=201,
        response_model=ItemWire,
        responses={
            200: {"model": ItemWire, "description": "the same body was sent before"},
            **errors(404, 409, *_ANY),
        },
    )
    async def put_item(
        team: TeamName, item: ItemId, body: ItemBody, request: Request, response: Response
    ) -> Any:
        check_id(item, "item")
        stored = StoredBody(
            body.type, body.instructions, tuple(body.depends_on), body.assignee, body.priority
        )
        found, created = await host.put(team, item, stored, created_by=caller_of(request.scope))
        response.status_code = 201 if created else 200
        return item_json(found)

    @app.get(
        "/v1/teams/{team}/items/{item}",
        operation_id="get_team_item",
        summary="A backlog item; with wait, once it is final (or as it stands after wait)",
        response_model=ItemWire,
        responses=errors(404, *_ANY),
    )
    async def get_item(team: TeamName, item: ItemId, request: Request, wait: Wait = None) -> Any:
        check_id(item, "item")
        caller = caller_of(request.scope)
        found = await (
            host.wait(team, item, wait, by=caller) if wait else host.get(team, item, by=caller)
        )
        return item_json(found)

    @app.post(
        "/v1/teams/{team}/items/{item}/cancel",
        operation_id="cancel_team_item",
        summary="Cancel a backlog item (its task stops at the end of the iteration in progress)",
        response_model=ItemWire,
        responses=errors(404, *_ANY),
    )
    async def cancel_item(team: TeamName, item: ItemId, request: Request) -> Any:
        check_id(item, "item")
        return item_json(await host.cancel(team, item, by=caller_of(request.scope)))

    @app.post(
        "/v1/teams/{team}/items/{item}/priority",
        operation_id="reprioritise_team_item",
        summary="Give a backlog item a new priority (higher: claimed first)",
        response_model=ItemWire,
        responses=errors(404, 409, *_ANY),
    )
    async def reprioritise_item(
        team: TeamName, item: ItemId, body: PriorityBody, request: Request
    ) -> Any:
        check_id(item, "item")
        caller = caller_of(request.scope)
        return item_json(await host.reprioritise(team, item, body.priority, by=caller))

    @app.get(
        "/v1/teams/{team}/items",
        operation_id="list_team_items",
        summary="A team's backlog, in the order its items were added, with counts by state",
        response_model=ItemListing,
        responses=errors(404, *_ANY),
    )
    async def list_items(team: TeamName, request: Request) -> Any:
        shown = await host.items(team, by=caller_of(request.scope))
        counts = Counter(i.state for i in shown)
        return {"team": team, "items": [item_json(i) for i in shown], "counts": dict(counts)}

    @app.post(
        "/v1/teams/{team}/messages",
        operation_id="send_team_message",
        summary="Send a message on a team's channel (again under its id: nothing sent twice)",
        status_code=201,
        response_model=MessageWire,
        responses={
            200: {"model": MessageWire, "description": "the same message was sent before"},
            **errors(404, 409, *_ANY),
        },
    )
    async def send_message(
        team: TeamName, body: MessageBody, request: Request, response: Response
    ) -> Any:
        caller = caller_of(request.scope)
        message = body.id if body.id is not None else f"m-{uuid.uuid4().hex}"
        stored = channel.MessageBody(caller, None, body.to, body.kind, body.text)
        found, created = await host.send(team, message, stored, created_by=caller)
        response.status_code = 201 if created else 200
        return message_json(found)

    @app.get(
        "/v1/teams/{team}/messages",
        operation_id="list_team_messages",
        summary="A page of a team's messages the caller may read, in the order sent",
        response_model=MessagePage,
        responses=errors(404, *_ANY),
    )
    async def list_messages(
        team: TeamName, request: Request, limit: Limit = 100, cursor: PageCursor = None
    ) -> Any:
        after = _after(cursor)
        caller = caller_of(request.scope)
        found = await host.messages(team, by=caller, after=after, limit=limit + 1)
        page, more = found[:limit], len(found) > limit
        return {
            "team": team,
            "messages": [message_json(m) for m in page],
            "next": encode_cursor((str(page[-1].seq), page[-1].id)) if more else None,
        }


def add_conversation_routes(app: FastAPI, conversations: Conversations) -> None:
    @app.post(
        "/v1/conversations/{conversation}/sessions/{session}",
        operation_id="run_conversation",
        summary="Run a moderated conversation to its end, from a message (or stream its turns)",
        response_model=ConversationRun,
        responses={
            200: {"description": "the run, once it has ended", "content": streamed()},
            **errors(404, 409, *_ANY),
        },
    )
    async def run(
        conversation: Name, session: SessionId, body: ConversationBody, request: Request
    ) -> Any:
        caller = caller_of(request.scope)
        shutdown = partial(cut_by_shutdown, request.scope)
        if wants_events(request.headers.get("accept")):
            return await stream_run(
                conversations, conversation, session, body.message, caller=caller,
                shutdown=shutdown,
            )  # fmt: skip
        cut = CutCause(shutdown=shutdown)  # a cut by the drain is recorded as the run stops
        outcome = await conversations.run(
            conversation, session, body.message, caller=caller, cut_cause=cut
        )
        return {
            "conversation": conversation,
            "session": session,
            "turns": [{"speaker": t.speaker, "text": t.text} for t in outcome.turns],
            "skipped": [
                {"speaker": s.speaker, "reason": s.reason, "detail": s.detail}
                for s in outcome.skipped
            ],
            "ended": {"reason": outcome.reason.value, "detail": outcome.detail},
            "usage": outcome.usage.as_dict(),
        }
