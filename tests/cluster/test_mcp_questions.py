"""An MCP server's question to a Task, answered in the cluster: the operator lists it in the
Task's status like a tool approval, ``ankka approve ... --content`` sends the person's values
(the form's fields) as a person whom RBAC allows, the server receives them once, and the Task
completes with the tool's result.

The catalogue (examples/mcp_catalog.py ``--elicit-tool``, the official SDK's server) and the
runtime (``ankka serve`` on tests/integration/asking_services.py, the autonomous agent
``purchaser``) run on loopback; the Agent names the runtime with ``spec.runtime.address``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.cluster.conftest import Kubectl, Operator
from tests.cluster.controlplane import ControlPlane
from tests.cluster.test_approvals import Desk
from tests.integration.conftest import model_env, received
from tests.integration.test_mcp import catalog_command
from tests.support.eventually import eventually
from tests.support.processes import Server, ankka_command, start

NS = "questions-lab"
BUY = {"tool_calls": [{"name": "mcp__catalog__buy", "arguments": {"product": "kettle-1"}}]}
RESULT = {"title": "bought", "points": ["a kettle"]}
DONE = {"tool_calls": [{"name": "complete_task", "arguments": RESULT}]}


@pytest.fixture(scope="module")
def desk(
    kubectl: Kubectl, operator: Operator, controlplane: ControlPlane
) -> Iterator[tuple[Desk, Server, Server]]:
    workdir = controlplane.workdir / "questions"
    workdir.mkdir(exist_ok=True)
    script = workdir / "script.json"
    script.write_text(json.dumps([BUY, DONE]))
    model = start(ankka_command("standin", "--script", str(script), "--port", "0"))
    mcp = start(catalog_command("--port", "0", "--elicit-tool", "--handshake-only"))
    env = {**model_env(model.url), "ANKKA_MCP_CATALOG_URL": mcp.url}
    store = f"sqlite:///{workdir / 'store.sqlite3'}"
    target = "tests.integration.asking_services:service"
    command = ankka_command("serve", target, "--port", "0", "--store", store)
    runtime = start([*command, "--approver-header", "X-Ankka-Approver"], env=env)
    here = Desk(controlplane, kubectl, runtime, workdir / "unused.txt", namespace=NS)
    here.register("asking", "tests.integration.asking_services")
    yield here, mcp, model
    runtime.stop()
    mcp.stop()
    model.stop()


def test_ankka_approve_answers_a_servers_question_with_the_persons_values_once(
    desk: tuple[Desk, Server, Server],
) -> None:
    here, mcp, model = desk
    status = here.awaiting("buy-1", "asking", "purchaser", "Buy a kettle.")
    assert status["phase"] == "AwaitingApproval"
    (pending,) = status["approvals"]
    assert pending["id"].startswith("eli_") and pending["tool"] == "mcp__catalog__buy"

    # Values the form refuses are a 422 naming the field, and nothing reaches the server.
    bad = here.approve(
        "buy-1", pending["id"], "--digest", pending["digest"], "--content", '{"quantity": "x"}'
    )
    assert bad.returncode == 1 and "422" in bad.stderr and "quantity" in bad.stderr, bad.stderr
    assert "elicitation answered" not in "".join(mcp.output)

    decided = here.approve(
        "buy-1", pending["id"], "--digest", pending["digest"], "--content", '{"quantity": 2}'
    )
    assert decided.returncode == 0, decided.stderr
    who = here.kubectl.run("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    assert json.loads(decided.stdout)["decided_by"] == who.stdout.strip()

    done = eventually(
        lambda: (s := here.status_of("buy-1")).get("phase") == "Completed" and s,
        what="the Task to complete",
        timeout=60,
    )
    assert done["result"] == RESULT and done["approvals"] == []
    tool_result = received(model)[1]["body"]["messages"][-1]["content"]
    assert tool_result.startswith("bought 2 of kettle-1"), tool_result
    assert "".join(mcp.output).count("elicitation answered accept") == 1, mcp.output
    listed = httpx.get(
        f"{here.runtime.url}/v1/approvals", params={"session": f"task:{done['runtimeTask']}"}
    ).json()["approvals"]
    assert [(a["kind"], a["state"]) for a in listed] == [("elicitation", "approved")]
