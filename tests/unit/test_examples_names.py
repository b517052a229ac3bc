"""Scripts in examples/ run as ``python examples/NAME.py`` (the MCP catalogue does), which puts
examples/ first on sys.path: a module there named like a standard-library one (``platform``)
would shadow it for every import the script makes."""

from __future__ import annotations

import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_no_example_module_shadows_a_standard_library_module() -> None:
    names = {p.stem for p in EXAMPLES.glob("*.py")} | {
        p.name for p in EXAMPLES.iterdir() if p.is_dir()
    }
    assert len(names) > 3  # the folder was found
    assert sorted(names & sys.stdlib_module_names) == []
