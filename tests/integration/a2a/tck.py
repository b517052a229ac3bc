"""The official A2A TCK (../shared/a2a-tck, a pinned commit) run against ``ankka serve``.

Its requirements go into a venv of its own under ``~/.cache/ankka`` (keyed by what it pins,
so its pins never touch the project's .venv), made once and reused. A run copies the TCK into
the test's own directory (shared/ is read-only in CI, and the TCK writes reports beside
itself), runs ``run_tck.py --category all`` with ``A2A-Version: 1.0`` passed through its
``A2A_AUTH_HEADERS`` setting, and reads back each category's per-test report and the
compliance level the TCK computed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["TCK", "Outcome", "level_without", "run_tck", "tck_python"]

_REPO = Path(__file__).resolve().parents[3]


def _tck_dir() -> Path:
    """``$ANKKA_SHARED/a2a-tck``, else ../shared beside the checkout (CI's layout), else the
    machine's /work/shared (a worktree's)."""
    given = os.environ.get("ANKKA_SHARED")
    for shared in (Path(given) if given else None, _REPO.parent / "shared", Path("/work/shared")):
        if shared is not None and (shared / "a2a-tck" / "run_tck.py").is_file():
            return shared / "a2a-tck"
    return _REPO.parent / "shared" / "a2a-tck"


TCK = _tck_dir()
CATEGORIES = ("mandatory", "capabilities", "transport-equivalence", "quality", "features")


def _cache() -> Path:
    return Path(os.environ.get("ANKKA_CACHE", Path.home() / ".cache" / "ankka"))


def _requirements() -> list[str]:
    listed = (TCK / "requirements.txt").read_text().split()
    declared = tomllib.loads((TCK / "pyproject.toml").read_text())["project"]["dependencies"]
    return sorted({*listed, *declared})


def tck_python() -> tuple[Path, float]:
    """The TCK venv's python (made now if missing) and how long making it took (0: cached)."""
    if not (TCK / "run_tck.py").is_file():
        raise RuntimeError(f"the A2A TCK is not at {TCK} (it comes with ../shared)")
    requirements = _requirements()
    key = hashlib.sha256(
        json.dumps([requirements, (TCK / "PINNED.md").read_text()]).encode()
    ).hexdigest()[:12]
    venv = _cache() / f"a2a-tck-venv-{key}"
    python = venv / "bin" / "python"
    if (venv / ".installed").is_file():
        return python, 0.0
    began = time.monotonic()
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", *requirements], check=True, timeout=1800
    )
    (venv / ".installed").write_text("\n".join(requirements))
    return python, time.monotonic() - began


@dataclass
class Outcome:
    """What one run said: per category and transport, each test's outcome; the TCK's
    compliance level (of the last transport it ran)."""

    tests: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    level: str = "unknown"
    seconds: float = 0.0
    output: str = ""

    def failed(self, category: str) -> set[str]:
        return {
            test
            for (cat, _), found in self.tests.items()
            if cat == category
            for test, outcome in found.items()
            if outcome in ("failed", "error")
        }

    def counts(self, category: str, transport: str) -> dict[str, int]:
        tally: dict[str, int] = {}
        for outcome in self.tests.get((category, transport), {}).values():
            tally[outcome] = tally.get(outcome, 0) + 1
        return tally


def run_tck(python: Path, sut_url: str, workdir: Path, *, timeout: float = 1800) -> Outcome:
    copy = workdir / "a2a-tck"
    shutil.copytree(TCK, copy, ignore=shutil.ignore_patterns("reports", "__pycache__"))
    for entry in copy.rglob("*"):
        entry.chmod(entry.stat().st_mode | 0o200)
    env = {
        **os.environ,
        "A2A_AUTH_HEADERS": json.dumps({"A2A-Version": "1.0"}),
        "TCK_STREAMING_TIMEOUT": "2.0",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    began = time.monotonic()
    done = subprocess.run(
        [str(python), "run_tck.py", "--sut-url", sut_url, "--category", "all",
         "--transports", "jsonrpc", "--compliance-report", "compliance.json"],
        cwd=copy, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    outcome = Outcome(seconds=time.monotonic() - began, output=done.stdout + done.stderr)
    reports = copy / "reports"
    for category in CATEGORIES:
        for path in sorted(reports.glob(f"{category}_*results.json")):
            transport = path.name.removeprefix(f"{category}_").removesuffix("_results.json")
            data = json.loads(path.read_text())
            found = {t["nodeid"]: t["outcome"] for t in data.get("tests", [])}
            outcome.tests[(category, transport or "-")] = found
    for path in sorted(reports.glob("compliance*.json")):
        summary = json.loads(path.read_text()).get("summary", {})
        outcome.level = str(summary.get("compliance_level", "unknown"))
    return outcome


def level_without(python: Path, outcome: Outcome, caused: set[str]) -> str:
    """The level the TCK's own thresholds (util_scripts/compliance_levels.py) give this run
    with the ``caused`` failures (the TCK's own) left out of the counts."""
    rates: list[float] = []
    for category in ("mandatory", "capabilities", "quality", "features"):
        passed = testable = 0
        for (cat, _), tests in outcome.tests.items():
            if cat != category:
                continue
            for test, result in tests.items():
                if result == "skipped" or (result in ("failed", "error") and test in caused):
                    continue
                testable += 1
                passed += result == "passed"
        rates.append(100.0 * passed / testable if testable else 100.0)
    code = (
        "import sys; from util_scripts.compliance_levels import get_compliance_level; "
        "print(get_compliance_level(*map(float, sys.argv[1:]))['name'])"
    )
    done = subprocess.run(
        [str(python), "-c", code, *map(str, rates)],
        cwd=TCK, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()
