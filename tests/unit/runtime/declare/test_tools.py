"""A tool's schema and its decoder come from one type."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.declare.tools import tool


@tool
def book(city: str, nights: int = 1, *, breakfast: bool = False) -> str:
    """Book a room."""
    return f"{city}:{nights}:{breakfast}"


class Search(BaseModel):
    query: str = Field(description="what to look for")
    limit: int = 10


@tool(name="search")
async def search_tool(arguments: Search) -> list[str]:
    return [arguments.query] * arguments.limit


def test_the_schema_is_built_from_the_signature() -> None:
    schema = book.spec.parameters
    assert schema["properties"]["city"]["type"] == "string"
    assert schema["properties"]["nights"]["type"] == "integer"
    assert schema["required"] == ["city"]
    assert schema["additionalProperties"] is False
    assert book.spec.description == "Book a room."


async def test_the_decoder_reads_what_the_schema_describes() -> None:
    outcome = await book.run('{"city": "Oslo", "nights": "2", "breakfast": true}')
    assert (outcome.content, outcome.is_error) == ("Oslo:2:True", False)


async def test_arguments_the_schema_does_not_allow_are_refused() -> None:
    wrong_type = await book.run('{"city": "Oslo", "nights": "many"}')
    extra = await book.run('{"city": "Oslo", "room": 4}')
    missing = await book.run("{}")
    assert all(o.is_error for o in (wrong_type, extra, missing))
    assert "nights" in wrong_type.content
    assert "room" in extra.content
    assert "city" in missing.content


async def test_a_pydantic_argument_type_is_used_as_is() -> None:
    assert search_tool.name == "search"
    props = search_tool.spec.parameters["properties"]
    assert props["query"]["description"] == "what to look for"
    outcome = await search_tool.run('{"query": "x", "limit": 2}')
    assert outcome.content == '["x", "x"]'


def test_a_parameter_without_a_type_is_refused_at_declaration() -> None:
    def untyped(city):  # type: ignore[no-untyped-def]
        return city

    with pytest.raises(ConfigurationError, match="'city' has no type annotation"):
        tool(untyped)
