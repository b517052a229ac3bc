"""The runtime's shape, as rules the code keeps (the layers themselves are .importlinter's).

- No module imports a private name (a leading underscore) of another: what a module keeps to
  itself can change without a second module breaking.
- Nothing in the runtime imports a test double but the public modules that ship them
  (``ankka.runtime.testing``, ``ankka.runtime.judgments``): a scripted provider is known by
  what its errors say of themselves (``ModelError.retryable``), never by its type.
- Every runtime module lives in a room, or is one of the public facades users import.
"""

from __future__ import annotations

import ast
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[3] / "ankka" / "runtime"
ROOMS = {"records", "declare", "providers", "store", "engine", "features", "drivers", "serve"}
FACADES = {
    "agents",
    "compaction",
    "guardrails",
    "judgments",
    "policy",
    "tasks",
    "teams",
    "testing",
    "tools",
}
DOUBLES = ("ankka.runtime.providers.scripted", "ankka.runtime.providers.scripted_judgments")


def _imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every ``from ankka... import name`` in ``path``."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ankka"):
            found.extend((node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend((alias.name, "") for alias in node.names)
    return found


def _modules() -> list[Path]:
    return sorted(RUNTIME.rglob("*.py"))


def _dotted(path: Path) -> str:
    parts = path.relative_to(RUNTIME.parents[1]).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_runtime_module_imports_a_private_name_of_another() -> None:
    private = [
        f"{_dotted(path)} imports {name} from {module}"
        for path in _modules()
        for module, name in _imports(path)
        if name.startswith("_") and not name.startswith("__")
    ]
    assert private == []


def test_only_the_public_testing_modules_import_the_test_doubles() -> None:
    allowed = {"ankka.runtime.testing", "ankka.runtime.judgments", *DOUBLES}
    importers = sorted(
        _dotted(path)
        for path in _modules()
        if _dotted(path) not in allowed
        and any(module.startswith(DOUBLES) for module, _ in _imports(path))
    )
    assert importers == []


def test_every_runtime_module_is_in_a_room_or_is_a_facade() -> None:
    top = {p.name.removesuffix(".py") for p in RUNTIME.iterdir() if p.name != "__pycache__"}
    assert top - {"__init__"} == ROOMS | FACADES
