"""``MODULE[:ATTR]`` as users type it: every wrong form says what to pass instead."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ankka.runtime.serve.target import TargetError, load_service, split_target


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A working directory holding svc.py (a Service named service, and a function)."""
    (tmp_path / "svc.py").write_text(
        "from ankka.runtime.agents import Service\n"
        "service = Service('svc')\n"
        "other = Service('other')\n"
        "def helper() -> None: ...\n"
    )
    (tmp_path / "broken.py").write_text("x = 1\nraise RuntimeError('the module failed')\n")
    (tmp_path / "needs.py").write_text("import not_installed_anywhere  # noqa\n")
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name in ("svc", "broken", "needs"):
        sys.modules.pop(name, None)
    if str(tmp_path) in sys.path:
        sys.path.remove(str(tmp_path))


@pytest.mark.parametrize(
    ("target", "hint"),
    [
        ("./svc.py:service", "did you mean svc:service?"),
        ("svc.py", "did you mean svc:service?"),
        ("pkg/sub/svc.py:app", "did you mean svc:app? "),
        ("svc.service", "did you mean svc:service? (MODULE:ATTR takes a colon)"),
        ("svc:nothing", "module 'svc' has no 'nothing'; it has svc:other, svc:service"),
        ("svc:helper", "svc:helper is a function, not a Service"),
        ("nosuch", "cannot import 'nosuch': no module of that name in"),
        ("broken", "importing 'broken' failed: RuntimeError: the module failed ("),
        ("needs", "it imports 'not_installed_anywhere', which is not installed"),
        ("", "is not MODULE[:ATTR]"),
        ("my-module:service", "is not MODULE[:ATTR]"),
    ],
)
def test_a_wrong_target_says_what_to_pass(folder: Path, target: str, hint: str) -> None:
    with pytest.raises(TargetError) as raised:
        load_service(target)
    assert hint in str(raised.value)
    assert "\n" not in str(raised.value)


def test_the_failing_line_of_a_broken_module_is_named(folder: Path) -> None:
    with pytest.raises(TargetError, match=r"broken\.py, line 2\)"):
        load_service("broken")


def test_a_right_target_loads_its_service(folder: Path) -> None:
    assert load_service("svc").name == "svc"
    assert load_service("svc:other").name == "other"
    assert split_target("a.b") == ("a.b", "service")
    assert load_service("ankka.local.demo:service").name == "platform"
