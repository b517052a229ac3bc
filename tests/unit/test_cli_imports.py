"""`ankka COMMAND` imports the chosen command's module only: `ankka serve` loads neither the
operator, the gateway nor the one-machine tooling, and not the HTTP stack before it needs it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ankka.cli import COMMANDS

PROBE = """
import json, sys
from ankka.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def loaded(*argv: str) -> tuple[set[str], str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120
    )
    modules: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return set(modules), done.stdout


def test_serve_help_loads_no_other_command() -> None:
    modules, shown = loaded("serve", "--help")
    assert "--store" in shown
    others = {"ankka.operator", "ankka.gateway", "ankka.local", "kopf", "kubernetes"}
    assert not {m for m in modules if any(m == o or m.startswith(o + ".") for o in others)}
    # The HTTP stack is imported once the instances with work are resumed, not to configure.
    assert "ankka.runtime.serve.http" not in modules and "starlette" not in modules


def test_the_command_list_names_every_command_without_loading_them() -> None:
    modules, shown = loaded("--help")
    for name in COMMANDS:
        assert name in shown
    assert not {m for m, _ in COMMANDS.values() if m in modules}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_still_has_its_own_help(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ankka", name, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"usage: ankka {name}")
