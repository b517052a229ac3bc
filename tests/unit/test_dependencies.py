"""Every third-party package the code imports is declared in pyproject.toml.

A package that only arrives through another package's dependencies (httptools through
``uvicorn[standard]``, httpx2 through the vendors' SDKs) disappears the day that package stops
needing it; declaring it is the only way to keep it. The check reads the imports with ``ast``,
maps import names to distributions with ``importlib.metadata`` and reads pyproject.toml:

- every third-party import in ``ankka/`` (and in tests, benchmarks, examples, scripts) names a
  distribution declared in the dependencies or in an extra;
- an import that runs when its module is imported (not inside a function, ``if TYPE_CHECKING``
  or ``try: ... except ImportError``) needs a base dependency, unless its module belongs to a
  package that exists for an extra (``ankka.operator`` for ``operator``).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE = ("ankka", "tests", "bench", "examples", "scripts")
# Packages that only work with their extra installed: their module-level imports may use it.
EXTRA_PACKAGES = {
    "ankka.operator": "operator",
    # The runtime imports these only when an agent lists an MCP server
    # (ankka.runtime.features.mcp.servers
    # is imported lazily); listing.py and declaration.py, which the core imports, use no SDK.
    "ankka.runtime.features.mcp.connection": "mcp",
    "ankka.runtime.features.mcp.results": "mcp",
    "ankka.runtime.features.mcp.lenient": "mcp",  # imported by connection.py only
    "ankka.runtime.features.mcp.result_type": "mcp",  # imported by connection.py only
    # OAuth: imported by servers.py (so, lazily) and by the MCP routes, mounted only when an
    # agent lists a server.
    "ankka.runtime.features.mcp.consent": "mcp",
    "ankka.runtime.features.mcp.credentials": "mcp",
    "ankka.runtime.features.mcp.oauth": "mcp",
    # What an MCP call adds to its span: imported by servers.py (so, lazily); the SDK needs
    # OpenTelemetry's API, which the extra declares.
    "ankka.runtime.features.mcp.spans": "mcp",
    # The notices between processes: imported by store/postgres.py only, after its own
    # import of psycopg has named the extra when it is missing.
    "ankka.runtime.store.postgres_notices": "postgres",
    # The tracer provider: imported by tracing.from_environment only once tracing is
    # configured, naming the extra when it is missing.
    "ankka._kernel.tracing_sdk": "tracing",
}
# Import names of benchmark peers that may not be installed here (``make bench`` installs them)
# and whose distribution is named otherwise.
NOT_INSTALLED = {"agents": ["openai-agents"], "pydantic_ai": ["pydantic-ai-slim"]}


@dataclass(frozen=True, slots=True)
class Import:
    module: str  # the importing module, dotted
    name: str  # the top-level import name, e.g. "yaml"
    line: int
    eager: bool  # runs when the importing module is imported


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match is not None, f"cannot read the requirement {requirement!r}"
    return _normalise(match.group(1))


def declared(pyproject: Mapping[str, object]) -> tuple[set[str], dict[str, set[str]]]:
    """The base dependencies' names and each extra's, normalised (PEP 503)."""
    project = pyproject["project"]
    assert isinstance(project, dict)
    base = {_requirement_name(r) for r in project.get("dependencies", [])}
    extras = {
        extra: {_requirement_name(r) for r in requirements}
        for extra, requirements in project.get("optional-dependencies", {}).items()
    }
    return base, extras


def _guarded(node: ast.AST) -> bool:
    """Code under ``if TYPE_CHECKING`` or in a ``try`` that handles ImportError."""
    if isinstance(node, ast.If):
        test = node.test
        return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        )
    if isinstance(node, ast.Try):
        for handler in node.handlers:
            names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            if any(
                isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError")
                for n in names
            ):
                return True
    return False


def imports_of(source: str, module: str) -> Iterator[Import]:
    """Absolute imports in ``source``, each marked eager or not."""

    def walk(node: ast.AST, eager: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(module, alias.name.split(".")[0], child.lineno, eager)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                yield Import(module, child.module.split(".")[0], child.lineno, eager)
            else:
                inner = eager and not isinstance(
                    child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
                )
                yield from walk(child, inner and not _guarded(child))

    yield from walk(ast.parse(source), True)


def third_party_imports(root: Path, folders: tuple[str, ...]) -> list[Import]:
    local = {p.name for p in root.iterdir()} | {"__future__"}
    found: list[Import] = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            for imp in imports_of(path.read_text(encoding="utf-8"), module):
                if imp.name not in sys.stdlib_module_names and imp.name not in local:
                    found.append(imp)
    return found


def undeclared(
    imports: list[Import],
    *,
    base: set[str],
    extras: Mapping[str, set[str]],
    distributions: Mapping[str, list[str]],
) -> list[str]:
    """What is wrong, one line per import: undeclared, or eager on an optional package."""
    anywhere = base.union(*extras.values())
    problems: list[str] = []
    for imp in imports:
        # An import name missing from the environment (a peer in its own venv) is taken as
        # its own distribution name.
        dists = {_normalise(d) for d in distributions.get(imp.name, [imp.name])}
        where = f"{imp.module.replace('.', '/')}.py:{imp.line}: import {imp.name}"
        if not dists & anywhere:
            problems.append(f"{where} ({', '.join(sorted(dists))}) is declared nowhere")
            continue
        if not imp.module.startswith("ankka.") or not imp.eager or dists & base:
            continue
        extra = next((e for p, e in EXTRA_PACKAGES.items() if imp.module.startswith(p)), None)
        if extra is None or not dists & extras.get(extra, set()):
            problems.append(
                f"{where} runs at import but {', '.join(sorted(dists))} is only in an extra; "
                "declare it as a dependency or import it lazily with an error naming the extra"
            )
    return problems


def test_every_import_is_a_declared_dependency() -> None:
    with (ROOT / "pyproject.toml").open("rb") as f:
        base, extras = declared(tomllib.load(f))
    problems = undeclared(
        third_party_imports(ROOT, CODE),
        base=base,
        extras=extras,
        distributions={**NOT_INSTALLED, **importlib.metadata.packages_distributions()},
    )
    assert problems == []


def test_an_import_that_arrives_only_through_another_package_is_reported() -> None:
    imports = list(imports_of("import httptools\n", "ankka.gateway.upstream"))
    problems = undeclared(
        imports,
        base={"uvicorn"},
        extras={},
        distributions={"httptools": ["httptools"]},
    )
    assert problems == [
        "ankka/gateway/upstream.py:1: import httptools (httptools) is declared nowhere"
    ]


def test_an_optional_package_imported_eagerly_outside_its_package_is_reported() -> None:
    source = "import kopf\n\ndef later() -> None:\n    import anthropic\n"
    imports = list(imports_of(source, "ankka.runtime.thing"))
    problems = undeclared(
        imports,
        base=set(),
        extras={"operator": {"kopf"}, "anthropic": {"anthropic"}},
        distributions={"kopf": ["kopf"], "anthropic": ["anthropic"]},
    )
    assert len(problems) == 1
    assert "import kopf runs at import" in problems[0]


def test_guarded_imports_are_not_eager() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import anthropic\n"
        "try:\n    import psycopg\nexcept ImportError:\n    psycopg = None\n"
        "import yaml\n"
    )
    eager = {i.name: i.eager for i in imports_of(source, "ankka.x")}
    assert eager == {"typing": True, "anthropic": False, "psycopg": False, "yaml": True}
