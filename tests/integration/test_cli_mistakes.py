"""Every command of ``ankka``, given what a user gets wrong, answers one clear line and exit 2.

Each case runs the real command as a process, in an empty folder outside the checkout (with
``svc.py`` holding a Service, as a user's would), with no kubeconfig and a private state
directory. The line names what was wrong and what to pass instead; no traceback, ever. The
commands are read from ``ankka --help``, so a new command without a case here fails.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.processes import ankka_command

pytestmark = pytest.mark.integration

_SERVICE = "from ankka.runtime.agents import Service\nservice = Service('svc')\n"
_BAD_URL_MODELS = "- {name: a, kind: ollama, url: 'localhost:11434'}\n"
_BAD_URL_MODEL = {
    "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
    "ANKKA_MODEL_DEFAULT_URL": "localhost:28091/v1",
    "ANKKA_MODEL_DEFAULT_MODEL": "m",
}

# command → (arguments, extra environment, what the one line must say)
MISTAKES: dict[str, list[tuple[list[str], dict[str, str], str]]] = {
    "serve": [
        (["./svc.py:service"], {}, "did you mean svc:service?"),
        (["svc.py"], {}, "did you mean svc:service?"),
        (["svc:nothing"], {}, "module 'svc' has no 'nothing'; it has svc:service"),
        (["nosuch"], {}, "cannot import 'nosuch'"),
        (["svc", "--port", "99999"], {}, "argument --port: 99999 is not a port"),
        (["svc", "--store", "bogus://x"], {}, "unknown store scheme 'bogus'"),
        (["svc"], _BAD_URL_MODEL, "ANKKA_MODEL_DEFAULT_URL='localhost:28091/v1' is not an http"),
        (["svc", "--max-connections", "0"], {}, "max_connections"),
        (["svc", "--bogus"], {}, "unrecognized arguments: --bogus"),
    ],
    "standin": [
        (["--script", "missing.json"], {}, "cannot read the script missing.json"),
        (["--script", "svc.py", "--port", "70000"], {}, "70000 is not a port"),
    ],
    "gateway": [
        (
            ["--models", "bad.yaml", "--insecure"],
            {},
            "'url' must be an http:// or https:// address: url='localhost:11434'",
        ),
        (["--models", "missing.yaml", "--insecure"], {}, "cannot read the models file"),
        (["--insecure"], {}, "pass --models FILE"),
        (["--models", "bad.yaml", "--insecure", "--port", "-1"], {}, "-1 is not a port"),
    ],
    "operator": [
        ([], {}, "no Kubernetes credentials"),
        (["--liveness", "localhost:8080"], {}, "--liveness='localhost:8080' is not an http"),
    ],
    "approve": [
        (["t1", "a1", "--digest", "d"], {}, "no Kubernetes credentials"),
        (["t1"], {}, "required: approval, --digest"),
    ],
    "local-model": [(["--port", "99999"], {}, "99999 is not a port")],
    "up": [
        (["--model", "localhost:11434"], {}, "is not an http:// or https:// URL"),
        (["--model", "gpt"], {}, "'gpt' is neither standin, local nor a URL"),
        (["--port", "99999"], {}, "99999 is not a port"),
        (["nosuch:service"], {}, "cannot import 'nosuch'"),
        (["./svc.py"], {}, "did you mean svc:service?"),
        (["--script", "missing.json"], {}, "pass --script with a stand-in script"),
        (["--model-name", "x"], {}, "--model-name names a model on the server --model URL"),
        (["--model", "http://127.0.0.1:1"], {}, "cannot reach the model server"),
    ],
    "down": [(["--bogus"], {}, "ankka down: unrecognized arguments: --bogus")],
    "status": [(["now"], {}, "ankka status: unrecognized arguments: now")],
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "svc.py").write_text(_SERVICE)
    (tmp_path / "bad.yaml").write_text(_BAD_URL_MODELS)
    return tmp_path


def _env(folder: Path, extra: dict[str, str]) -> dict[str, str]:
    """No kubeconfig, no cluster, no model settings but those the case sets."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANKKA_", "KUBE")) and k not in ("PYTHONPATH",)
    }
    return {**kept, "HOME": str(folder), "ANKKA_STATE": str(folder / "state"), **extra}


def _run(folder: Path, args: list[str], extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ankka_command(*args),
        cwd=folder,
        env=_env(folder, extra),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _commands() -> list[str]:
    shown = subprocess.run(
        ankka_command("--help"), capture_output=True, text=True, check=True
    ).stdout
    section = shown.split("positional arguments:", 1)[1].split("options:", 1)[0]
    listed = re.findall(r"^    ([a-z][a-z-]*)", section, flags=re.MULTILINE)
    assert len(listed) > 5, shown
    return listed


def test_every_command_has_its_mistakes_here() -> None:
    assert sorted(_commands()) == sorted(MISTAKES)


@pytest.mark.parametrize(
    ("command", "args", "extra", "says"),
    [(c, a, e, s) for c, cases in MISTAKES.items() for a, e, s in cases],
    ids=[f"{c}:{' '.join(a) or '-'}" for c, cases in MISTAKES.items() for a, _, _ in cases],
)
def test_a_mistake_is_one_clear_line_and_exit_2(
    folder: Path, command: str, args: list[str], extra: dict[str, str], says: str
) -> None:
    done = _run(folder, [command, *args], extra)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"ankka {command}: "), lines[0]
    assert says in lines[0]


def test_ankka_says_its_version_and_refuses_an_unknown_command(folder: Path) -> None:
    version = _run(folder, ["--version"], {})
    assert version.returncode == 0
    assert re.fullmatch(r"ankka \d+\.\d+\.\d+\S*", version.stdout.strip()), version.stdout
    unknown = _run(folder, ["sevre"], {})
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        unknown.stderr.strip()
    ]  # one line, naming the commands there are
    assert "invalid choice: 'sevre'" in unknown.stderr
    assert "'serve'" in unknown.stderr
