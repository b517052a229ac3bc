"""A tool's argument check: references to other documents are never fetched, and a null for
a property left out is the property left out (docs/mcp.md, "Arguments")."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ankka.runtime.features.mcp.results import ArgumentCheck
from tests.support.http_reply import in_thread, send_json


class _Canary(ThreadingHTTPServer):
    """A loopback server that serves a schema and counts who asked for it."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        canary = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                canary.asked.append(self.path)
                send_json(self, {"type": "object", "properties": {"name": {"type": "string"}}})

            def log_message(self, format: str, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/profile-schema.json"


@pytest.fixture
def canary() -> Iterator[_Canary]:
    with in_thread(_Canary()) as server:
        yield server


def _lookup(ref: str) -> ArgumentCheck:
    return ArgumentCheck(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"userId": {"type": "string", "pattern": "^[a-z0-9-]+$"}},
            "properties": {"id": {"$ref": "#/$defs/userId"}, "profile": {"$ref": ref}},
            "required": ["id"],
        }
    )


def test_same_document_refs_are_resolved(canary: _Canary) -> None:
    check = _lookup(canary.url)
    assert check.problem({"id": "user-1"}, "t") is None
    assert "does not match" in str(check.problem({"id": "Not An Id"}, "t"))
    assert canary.asked == []


def test_a_ref_to_a_network_uri_is_never_fetched_and_arguments_reaching_it_are_refused(
    canary: _Canary,
) -> None:
    check = _lookup(canary.url)
    problem = check.problem({"id": "user-1", "profile": {"name": "Ada"}}, "mcp__s__lookup_user")
    assert problem is not None
    assert "mcp__s__lookup_user" in problem and canary.url in problem
    assert "never fetched" in problem
    assert canary.asked == []


def test_a_null_for_an_optional_property_that_cannot_be_null_is_left_out() -> None:
    check = ArgumentCheck(
        {
            "type": "object",
            "properties": {
                "region": {"type": "string"},
                "verbose": {"type": "boolean"},
                "note": {"type": ["string", "null"]},
            },
            "required": ["region"],
        }
    )
    settled = check.settled({"region": "us-east1", "verbose": None, "note": None})
    assert settled == {"region": "us-east1", "note": None}
    assert check.problem(settled, "t") is None


def test_a_null_for_a_required_property_is_still_refused() -> None:
    check = ArgumentCheck(
        {"type": "object", "properties": {"region": {"type": "string"}}, "required": ["region"]}
    )
    settled = check.settled({"region": None})
    assert settled == {"region": None}
    assert "None is not of type 'string'" in str(check.problem(settled, "t"))
