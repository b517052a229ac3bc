"""One error tree: every public exception class in ``ankka/`` derives from ``AnkkaError``.

Whoever catches ankka's errors (the HTTP layers, the CLIs, a user's own code) can then catch
one root and read ``kind`` and ``status``; a class outside the tree is a failure nobody maps.
Private classes (a leading underscore) are control flow inside one module and may stay out.
"""

from __future__ import annotations

import importlib
import inspect
import types
from collections.abc import Iterable
from pathlib import Path

import pytest

from ankka._kernel.errors import AnkkaError, ConfigurationError
from ankka._kernel.tls import TLSFilesError
from ankka.api.capabilities import ProbeError
from ankka.operator.kube import KubeError
from ankka.runtime.providers import anthropic_wire, responses_wire
from ankka.runtime.providers.failures import StreamFailed

PACKAGE = Path(__file__).resolve().parents[2] / "ankka"


def ankka_modules() -> list[types.ModuleType]:
    """Every module of the package, imported (``__main__`` modules run their CLI: skipped)."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    return [importlib.import_module(name) for name in names]


def outside_the_tree(modules: Iterable[types.ModuleType]) -> list[str]:
    """Public exception classes defined in ``modules`` that do not derive from AnkkaError."""
    found = []
    for module in modules:
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not name.startswith("_")
                and not issubclass(value, AnkkaError)
            ):
                found.append(f"{module.__name__}.{name}")
    return found


def test_every_public_exception_in_ankka_derives_from_the_root() -> None:
    modules = ankka_modules()
    assert len(modules) > 50  # the walk found the package
    assert outside_the_tree(modules) == []


def test_a_public_exception_outside_the_tree_is_reported() -> None:
    module = types.ModuleType("ankka.example")
    module.__dict__["AnkkaError"] = AnkkaError
    exec(
        "class Lost(Exception): pass\n"
        "class _Private(Exception): pass\n"
        "class Kept(AnkkaError): pass\n",
        module.__dict__,
    )
    assert outside_the_tree([module]) == ["ankka.example.Lost"]


@pytest.mark.parametrize(
    ("error", "root"),
    [
        (KubeError, AnkkaError),
        (ProbeError, AnkkaError),
        (TLSFilesError, ConfigurationError),
        (StreamFailed, AnkkaError),
    ],
)
def test_the_errors_an_operator_meets_are_in_the_tree(
    error: type[Exception], root: type[AnkkaError]
) -> None:
    assert issubclass(error, root)


def test_both_wire_adapters_share_one_stream_failure() -> None:
    assert "StreamFailed" not in vars(responses_wire).get("__all__", ())
    assert "StreamFailed" not in vars(anthropic_wire).get("__all__", ())
    with pytest.raises(StreamFailed, match="quota"):
        responses_wire.read_response({"status": "failed", "error": {"message": "quota"}}, model="m")


def test_a_failed_kube_request_keeps_the_api_servers_status_apart_from_its_own() -> None:
    error = KubeError("GET /api/v1/namespaces/x/secrets/y", 403, "forbidden")
    assert error.http_status == 403
    assert error.status == 502  # what ankka answers, like every AnkkaError
    assert error.kind == "kube_error"
    assert "HTTP 403: forbidden" in str(error)
