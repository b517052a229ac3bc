"""The chart's RBAC against the real API server: the operator lists and watches no Secret
outside the release namespace (it may get one: it grants an Agent's runtime get on its MCP
credentials Secret, and RBAC lets a Role grant only what its writer holds), reads none to keep
every Agent's certificate (judged from the Agent's status;
a deleted Secret is issued again at the resync). The operator here runs with the chart's
ServiceAccount token, so everything it does is what these rules allow."""

from __future__ import annotations

import json

import pytest

from tests.cluster.conftest import PLATFORM_NS, Kubectl, Operator
from tests.support.eventually import eventually

NS = "rbac-lab"
OPERATOR = f"system:serviceaccount:{PLATFORM_NS}:ankka-operator"


@pytest.mark.parametrize(
    ("verb", "where", "allowed"),
    [
        # Only because it grants it (MCP credentials); patch, held before, answers the object.
        ("get", ["-n", "kube-system"], "yes"),
        ("list", ["-A"], "no"),
        ("watch", ["-A"], "no"),
        ("list", ["-n", PLATFORM_NS], "no"),
        ("create", ["-n", "kube-system"], "yes"),  # Agents' certificates, in any namespace
    ],
)
def test_the_operator_may_not_list_or_watch_secrets_outside_its_namespace(
    kubectl: Kubectl, operator: Operator, verb: str, where: list[str], allowed: str
) -> None:
    out = kubectl.run("auth", "can-i", verb, "secrets", *where, "--as", OPERATOR, check=False)
    assert out.stdout.strip() == allowed, (verb, where, out.stdout, out.stderr)


def test_a_deleted_certificate_secret_is_issued_again_without_reading_any(
    kubectl: Kubectl, operator: Operator
) -> None:
    kubectl.run("create", "namespace", NS)
    agent = {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": "keeper", "namespace": NS},
        "spec": {"image": "registry.example/keeper:1", "module": "keeper"},
    }
    kubectl.run("apply", "-f", "-", stdin=json.dumps(agent))

    def recorded() -> dict[str, str]:
        status = (kubectl.get("agent", "keeper", NS) or {}).get("status") or {}
        assert status.get("certificateProfile") and status.get("certificateRenewAt"), status
        return status

    status = eventually(recorded, what="keeper's certificate recorded in its status")
    first = kubectl.get("secret", "keeper-tls", NS)
    assert first is not None
    kubectl.run("delete", "secret", "keeper-tls", "-n", NS)
    # The resync (every 30 s here) finds it gone (a no-op patch answers 404) and issues it
    # again; with this tier's 20-second certificates the renewal (an apply, which creates it)
    # may come first. Either way nothing read it.
    again = eventually(
        lambda: kubectl.get("secret", "keeper-tls", NS), what="keeper-tls again", timeout=90
    )
    assert again is not None
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    assert again["data"]["tls.crt"] != first["data"]["tls.crt"]
    assert status["certificateProfile"] == recorded()["certificateProfile"]
