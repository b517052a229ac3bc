"""The console's form for an MCP server's question: an input per field, and what is typed
taken as the schema's types (pure)."""

from __future__ import annotations

from typing import Any

from ankka.runtime.serve.console.approvals import approvals_table, form_content

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "quantity": {"type": "integer"},
        "price": {"type": "number"},
        "gift": {"type": "boolean", "default": False},
        "note": {"type": "string", "default": "none"},
    },
    "required": ["quantity"],
}
QUESTION = {
    "id": "eli_1",
    "kind": "elicitation",
    "tool": "mcp__shop__buy",
    "arguments": {"message": "How many?", "requestedSchema": SCHEMA},
    "digest": "d" * 64,
    "expires_at": None,
    "session": "s",
    "agent": "clerk",
    "state": "pending",
}


def test_a_question_shows_an_input_per_field_and_a_tool_call_none() -> None:
    html = approvals_table([QUESTION], token="t")
    for name in SCHEMA["properties"]:
        assert f'name="field.{name}"' in html
    assert 'placeholder="none"' in html  # the default, sent when the field is left empty
    call = {**QUESTION, "id": "apr_1", "kind": "tool_call"}
    assert 'name="field.' not in approvals_table([call], token="t")


def test_what_is_typed_is_taken_as_the_schemas_types_and_empty_fields_are_left_out() -> None:
    form = {
        "field.quantity": ["3"],
        "field.price": ["2.5"],
        "field.gift": ["on"],
        "field.note": [""],
        "field.other": ["x"],
    }
    assert form_content(form, SCHEMA["properties"]) == {"quantity": 3, "price": 2.5, "gift": True}
    # A value that does not convert is sent as typed, so the schema check names the field.
    assert form_content({"field.quantity": ["three"]}, SCHEMA["properties"]) == {
        "quantity": "three"
    }
