"""``kubectl explain`` documents every field of every CRD: no ``<no description>``, no
``<empty>``, no reStructuredText markup, one line per paragraph."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ankka.api.crdgen import RESOURCES, crd, describe
from ankka.api.resources import Resource


def fields(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every field under ``node``, with its ``kubectl explain`` path.

    The root's ``metadata`` is left out: the API server refuses anything but its type there, and
    ``kubectl explain`` shows the ObjectMeta documentation for it.
    """
    for name, sub in (node.get("properties") or {}).items():
        if "." not in path and name == "metadata":
            continue
        yield f"{path}.{name}", sub
        yield from fields(sub, f"{path}.{name}")
    items = node.get("items")
    if isinstance(items, dict):
        yield from fields(items, path)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        yield from fields(extra, path)


def schema_of(resource: type[Resource]) -> dict[str, Any]:
    schema: dict[str, Any] = crd(resource)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.kind)
def test_every_field_has_a_description(resource: type[Resource]) -> None:
    schema = schema_of(resource)
    missing = [p for p, sub in fields(schema, resource.kind.lower()) if not sub.get("description")]
    assert schema.get("description"), f"{resource.kind} has no description"
    assert not missing, (
        f"fields without a description (kubectl explain prints <no description>): {missing}; "
        "add a docstring after the field in ankka/api/resources.py, then run "
        "python -m ankka.api.crdgen"
    )


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.kind)
def test_descriptions_are_plain_text_one_line_per_paragraph(resource: type[Resource]) -> None:
    schema = schema_of(resource)
    for path, sub in [(resource.kind.lower(), schema), *fields(schema, resource.kind.lower())]:
        text = sub["description"]
        assert "``" not in text, f"{path}: raw double backticks in {text!r}"
        for paragraph in text.split("\n\n"):
            assert "\n" not in paragraph, f"{path}: a paragraph broken over lines: {text!r}"


def test_describe_reflows_paragraphs_and_drops_literal_markup() -> None:
    text = "One ``field`` and\n    another line.\n\n    Second   paragraph.\n"
    assert describe(text) == "One field and another line.\n\nSecond paragraph."
