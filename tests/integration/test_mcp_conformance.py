"""Every client scenario of the official MCP conformance suite, against ankka's own client.

The suite (@modelcontextprotocol/conformance, pinned in scripts/mcp-conformance/) starts its test
server for a scenario, runs examples/mcp_conformance_client.py (which connects, lists and calls
through McpServers, as an agent's turn does) and judges what it saw. A scenario passes when the
suite's exit code is 0 and no check is a FAILURE or a WARNING (the suite's own baseline rule).

docs/mcp.md's table lists every scenario with its result; a scenario the suite has and the table
lacks (or the reverse) fails here, and so does a result that is not the table's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import REPO

pytestmark = pytest.mark.integration

SCRIPT = REPO / "scripts" / "mcp_conformance.sh"
DOCS = REPO / "docs" / "mcp.md"
# Scenarios whose test server breaks a rule the client keeps; the suite's later releases fixed
# them. Each entry says why, and the test asserts the failure is exactly that (and fails when
# the scenario passes, so a stale entry cannot hide).
SUITE_DEFECTS: dict[str, str] = {
    "auth/2025-03-26-oauth-metadata-backcompat": (
        # Its metadata, served at /.well-known/oauth-authorization-server, names the issuer
        # <origin>/oauth; RFC 8414 section 3.3 says such metadata MUST NOT be used.
        "Authorization server metadata issuer mismatch"
    ),
}


def _suite() -> list[str]:
    done = subprocess.run(
        [str(SCRIPT), "path"], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"the conformance suite cannot be installed:\n{done.stderr}"
    return done.stdout.split()


def _scenarios() -> list[str]:
    listed = subprocess.run(
        [*_suite(), "list", "--client"], capture_output=True, text=True, timeout=60, check=True
    )
    return re.findall(r"^  - (\S+)", listed.stdout, flags=re.M)


def _documented() -> dict[str, str]:
    section = DOCS.read_text().split("## Conformance", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([^`]+)` \| ([^|]+?) \|", section, flags=re.M))


SCENARIOS = _scenarios()


def test_the_docs_table_lists_every_client_scenario_of_the_suite() -> None:
    assert sorted(_documented()) == sorted(SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_client_scenario(scenario: str, tmp_path: Path) -> None:
    command = f"{sys.executable} {REPO / 'examples' / 'mcp_conformance_client.py'}"
    done = subprocess.run(
        [*_suite(), "client", "--scenario", scenario, "--command", command, "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    (run,) = list(tmp_path.glob(f"{scenario}-*"))
    checks = json.loads((run / "checks.json").read_text())
    bad = [c for c in checks if c["status"] in ("FAILURE", "WARNING")]
    stderr = (run / "stderr.txt").read_text() if (run / "stderr.txt").exists() else ""
    documented = _documented().get(scenario, "")
    if scenario in SUITE_DEFECTS:
        assert bad, f"{scenario} passes now: drop it from SUITE_DEFECTS and the docs"
        assert SUITE_DEFECTS[scenario] in stderr, stderr[-3000:]
        assert documented.startswith("fails: suite defect")
        return
    assert done.returncode == 0 and not bad, (
        f"{scenario}:\n"
        + "\n".join(
            f"{c['status']} {c['id']}: {c.get('errorMessage') or c['description']}" for c in bad
        )
        + f"\n--- suite output ---\n{done.stdout[-3000:]}\n--- client stderr ---\n{stderr[-3000:]}"
    )
    assert documented == "passes"
