"""The docs' preset table is generated from the table in code, and must not drift."""

from __future__ import annotations

from ankka.runtime.providers.config import PRESETS
from ankka.runtime.providers.presets_doc import BEGIN, DOC, END, render, updated


def test_the_docs_preset_table_is_the_generated_one() -> None:
    text = DOC.read_text()
    assert updated(text) == text, (
        "docs/configuration.md has drifted from the preset table in code: run "
        "python -m ankka.runtime.providers.presets_doc"
    )


def test_the_table_names_every_preset() -> None:
    table = render()
    for name in PRESETS:
        assert f"| `{name}` |" in table


def test_only_the_part_between_the_markers_is_rewritten() -> None:
    text = f"intro\n{BEGIN}\nstale table\n{END}\noutro\n"
    new = updated(text)
    assert new.startswith(f"intro\n{BEGIN}\n")
    assert new.endswith(f"{END}\noutro\n")
    assert "stale table" not in new
