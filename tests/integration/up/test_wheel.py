"""The package as a user gets it: the wheel ``python -m build`` makes from the checkout,
installed with pip into a fresh venv outside the checkout, then ``ankka up``, its console and
one turn from a directory that holds nothing of ankka's.

The rest of the suite runs on an editable install, which reads every file from the checkout;
only a built wheel shows a file the package forgot (the console's script once was). So:

- every file under ``ankka/`` that is not a module is in the wheel, and so is every file the
  code opens through ``importlib.resources`` (read from the calls themselves, so a new one is
  covered without a list kept by hand);
- the installed ``ankka`` is the wheel's, not the checkout's, and serves the built-in demo
  (``ankka.local.demo``) and its stand-in script with no ``examples/`` anywhere.

The venv gets its dependencies from the package index through pip's cache (a warm install
takes seconds; docs/testing.md has the figures).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.integration.up.conftest import start_up
from tests.support.processes import REPO

pytestmark = pytest.mark.integration


def _tracked(root: Path) -> list[str]:
    """The files a commit of this checkout would hold (tracked, or new and not ignored)."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted(p for p in listed.split("\0") if p and (root / p).is_file())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build`` on a copy of the checkout's files: the sdist, then the wheel from
    it, as a release is built (the copy keeps build/ and egg-info out of the checkout)."""
    source = tmp_path_factory.mktemp("source")
    for name in _tracked(REPO):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheels = sorted(out.glob("ankka-*.whl"))
    assert len(wheels) == 1, sorted(p.name for p in out.iterdir())
    return wheels[0]


def _opened_resources(root: Path) -> set[str]:
    """``pkg/path`` for every ``resources.files("pkg").joinpath("path")`` in ``ankka/``."""
    found: set[str] = set()
    for module in (root / "ankka").rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text(), str(module))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            inner = node.func.value
            if node.func.attr != "joinpath" or not isinstance(inner, ast.Call):
                continue
            if not (isinstance(inner.func, ast.Attribute) and inner.func.attr == "files"):
                continue
            parts = [*inner.args, *node.args]
            assert all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in parts), (
                f"{module}:{node.lineno}: name the package and the file literally, so this "
                "test can check the file ships"
            )
            package, *path = (str(a.value) for a in parts if isinstance(a, ast.Constant))
            found.add("/".join([package.replace(".", "/"), *path]))
    return found


def test_the_wheel_holds_every_file_the_code_opens(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        shipped = set(archive.namelist())
    data = {
        name for name in _tracked(REPO) if name.startswith("ankka/") and not name.endswith(".py")
    }
    opened = _opened_resources(REPO)
    # The scan finds the calls it must (else it would pass by finding nothing).
    console = "ankka/runtime/serve/console/static/console.js"
    assert {console, "ankka/local/demo/standin.json"} <= opened
    assert sorted(p for p in opened if not (REPO / p).is_file()) == []
    assert sorted((data | opened) - shipped) == [], "add them to package-data in pyproject.toml"


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (no ankka, no checkout on its path) with the wheel installed by pip: this
    environment's pip, pointed at the venv's interpreter (``--python``), so the venv is not
    given a pip of its own by ensurepip first (10-20 s here) only to run it once."""
    home = tmp_path_factory.mktemp("venv")
    venv.create(home, with_pip=False)
    python = str(home / "bin" / "python")
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    return home


def _outside_env() -> dict[str, str]:
    """This environment without anything that would put the checkout on the path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """An empty working directory outside the checkout."""
    where = tmp_path / "elsewhere"
    where.mkdir()
    assert not where.resolve().is_relative_to(REPO)
    return where


def test_ankka_up_answers_and_its_console_works_from_the_installed_wheel(
    installed: Path, elsewhere: Path
) -> None:
    python = str(installed / "bin" / "python")
    where = subprocess.run(
        [python, "-c", "import ankka; print(ankka.__file__)"],
        cwd=elsewhere,
        env=_outside_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(installed), where  # the wheel's ankka, not the checkout's
    version = subprocess.run(
        [str(installed / "bin" / "ankka"), "--version"],
        cwd=elsewhere,
        env=_outside_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert version.stdout.strip() == "ankka 0.1.0"

    up = start_up(
        elsewhere / "state",
        ankka=[str(installed / "bin" / "ankka")],
        cwd=elsewhere,
        env=_outside_env(),
    )
    try:
        assert up.process.poll() is None, up.text
        assert "ankka serve ankka.local.demo:service" in up.text
        answer = httpx.post(
            f"{up.url}/v1/agents/weather/sessions/first",
            json={"message": "What is the weather in Helsinki?"},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["reply"] == "It is -3 °C with light snow in Helsinki: dress warmly."
        page = httpx.get(f"{up.url}/console/sessions/first", timeout=30)
        assert page.status_code == 200, page.text
        assert 'data-tool="get_weather"' in page.text
        script = httpx.get(f"{up.url}/console/static/console.js", timeout=30)
        assert script.status_code == 200
        assert script.headers["content-type"].startswith("text/javascript")
        packaged = REPO / "ankka" / "runtime" / "serve" / "console" / "static" / "console.js"
        assert script.content == packaged.read_bytes()
    finally:
        up.stop()
    assert up.process.returncode == 0, up.text
    assert "stopped model, gateway, runtime" in up.text
