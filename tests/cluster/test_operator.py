"""The operator, its CRDs and the chart against a real kube-apiserver.

The examples in ``examples/manifests/`` are applied as a user would (``kubectl apply -f``), with
one change: the adopted InstallationModel's endpoint is pointed at the stand-in on loopback.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ankka.operator import certs
from tests.cluster.conftest import (
    PLATFORM_NS,
    ROOT,
    Kubectl,
    Operator,
    StandIn,
)
from tests.cluster.controlplane import ControlPlane
from tests.support.eventually import eventually

NS = "shop"


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return {}


def secret_pair(secret: dict[str, Any]) -> certs.KeyPair:
    data = secret["data"]
    return certs.KeyPair(
        cert_pem=base64.b64decode(data["tls.crt"]).decode(),
        key_pem=base64.b64decode(data["tls.key"]).decode(),
    )


def reasons(kubectl: Kubectl, kind: str, name: str) -> dict[str, dict[str, Any]]:
    """The operator's Events about one object, by reason (``kubectl describe`` lists them)."""
    selector = f"involvedObject.kind={kind},involvedObject.name={name}"
    out = kubectl.run("get", "events", "-n", NS, "--field-selector", selector, "-o", "json")
    items = yaml.safe_load(out.stdout)["items"]
    return {e["reason"]: e for e in items if e["source"].get("component") == "ankka-operator"}


def poll_reason(kubectl: Kubectl, kind: str, name: str, reason: str) -> dict[str, Any]:
    found: dict[str, Any] = eventually(
        lambda: reasons(kubectl, kind, name).get(reason), what=f"a {reason} Event on {kind} {name}"
    )
    return found


@pytest.fixture(scope="module")
def shop(
    kubectl: Kubectl, operator: Operator, stand_in: StandIn, controlplane: ControlPlane
) -> Path:
    """The example manifests, applied with the adopted endpoint pointed at the stand-in."""
    out_dir = controlplane.workdir / "manifests"
    out_dir.mkdir(exist_ok=True)
    for source in sorted((ROOT / "examples" / "manifests").glob("*.yaml")):
        text = source.read_text().replace("http://ollama.models.svc:11434", stand_in.url)
        (out_dir / source.name).write_text(text)
    kubectl.run("apply", "-f", str(out_dir))
    return out_dir


def test_chart_lints_clean(controlplane: ControlPlane) -> None:
    out = subprocess.run(
        [str(controlplane.bin / "helm"), "lint", "--strict", str(ROOT / "charts" / "ankka")],
        env=controlplane.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 chart(s) failed" in out.stdout


def test_chart_values_are_checked_by_the_schema(controlplane: ControlPlane) -> None:
    out = subprocess.run(
        [
            str(controlplane.bin / "helm"),
            "template",
            "ankka",
            str(ROOT / "charts" / "ankka"),
            "--set",
            "operator.replicas=2",
            "--set",
            "gateway.port=http",
        ],
        env=controlplane.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    assert "values don't meet the specifications of the schema" in out.stderr, out.stderr
    assert "operator.replicas" in out.stderr or "/operator/replicas" in out.stderr, out.stderr


def test_helm_install_created_crds_and_platform_objects(
    kubectl: Kubectl, helm_release: str
) -> None:
    for crd in ("agents.ankka.dev", "installationmodels.ankka.dev", "tasks.ankka.dev"):
        assert kubectl.get("crd", crd, "default") is not None, crd
    for kind, name in [
        ("deployment", "ankka-operator"),
        ("deployment", "ankka-gateway"),
        ("service", "ankka-gateway"),
        ("serviceaccount", "ankka-operator"),
    ]:
        assert kubectl.get(kind, name, PLATFORM_NS) is not None, (kind, name)


def test_gateway_certificate_names_the_platform_identity(
    kubectl: Kubectl, operator: Operator
) -> None:
    secret = eventually(
        lambda: kubectl.get("secret", "ankka-gateway-tls", PLATFORM_NS),
        what="the gateway's certificate Secret",
    )
    pair = secret_pair(secret)
    assert certs.matches(pair)
    assert certs.uris_of(pair.cert_pem) == [certs.GATEWAY_URI]


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (
            {
                "kind": "InstallationModel",
                "spec": {"model": "m", "server": {"kind": "triton", "image": "x"}},
            },
            'spec.server.kind: Unsupported value: "triton"',
        ),
        (
            {
                "kind": "InstallationModel",
                "spec": {
                    "model": "m",
                    "endpoint": {"url": "http://a"},
                    "server": {"kind": "ollama", "image": "x"},
                },
            },
            "set exactly one of spec.server (a server to deploy) or spec.endpoint",
        ),
        (
            {"kind": "Agent", "spec": {"image": "i", "module": "m", "replicas": "two"}},
            "spec.replicas: Invalid value",
        ),
        (
            {
                "kind": "Agent",
                "spec": {
                    "image": "i",
                    "module": "m",
                    "models": [{"name": "--", "preset": "openai"}],  # no letter or digit
                },
            },
            "spec.models[0].name",
        ),
    ],
    ids=["unknown-server-kind", "server-and-endpoint", "wrong-type", "bad-model-name"],
)
def test_invalid_resources_are_refused_by_the_api_server(
    kubectl: Kubectl, helm_release: str, manifest: dict[str, Any], expected: str
) -> None:
    body = {
        "apiVersion": "ankka.dev/v1alpha1",
        "metadata": {"name": "invalid", "namespace": "default"},
        **manifest,
    }
    out = kubectl.run("apply", "-f", "-", check=False, stdin=yaml.safe_dump(body))
    assert out.returncode != 0
    assert expected in out.stderr, out.stderr


def test_agent_is_held_until_its_model_is_served_then_released(
    kubectl: Kubectl, shop: Path, stand_in: StandIn, operator: Operator
) -> None:
    held = eventually(
        lambda: (
            (a := kubectl.get("agent", "cart", NS))
            and (a.get("status") or {}).get("phase") == "Held"
            and a
        ),
        what="cart to be held",
    )
    assert condition(held, "ModelsServed")["status"] == "False"
    assert "smollm" in condition(held, "ModelsServed")["message"]
    assert held["status"]["awaitingModels"] == ["smollm"]
    deployment = eventually(lambda: kubectl.get("deployment", "cart", NS), what="cart's Deployment")
    assert deployment["spec"]["replicas"] == 0
    # The model is probed (and refused: 503) while the agent stays held.
    eventually(lambda: stand_in.shows >= 2, what="a failed probe")
    model = kubectl.get("installationmodel", "smollm", NS)
    assert condition(model, "Served")["status"] == "False"
    assert kubectl.get("deployment", "cart", NS)["spec"]["replicas"] == 0  # type: ignore[index]

    stand_in.serve()
    served = eventually(
        lambda: (
            condition(kubectl.get("installationmodel", "smollm", NS), "Served").get("status")
            == "True"
        ),
        what="smollm to be Served",
    )
    assert served
    released = eventually(  # at once, not at the next periodic probe
        lambda: (d := kubectl.get("deployment", "cart", NS)) and d["spec"]["replicas"] == 2 and d,
        what="cart to be released",
        timeout=10,
    )
    assert released["metadata"]["annotations"]["ankka.dev/held"] == "false"
    agent = eventually(
        lambda: (
            (a := kubectl.get("agent", "cart", NS))
            and a["status"].get("phase") == "Progressing"
            and a
        ),
        what="cart released (no pods in this tier: Progressing)",
    )
    assert condition(agent, "ModelsServed")["status"] == "True"
    model = kubectl.get("installationmodel", "smollm", NS)
    assert model is not None
    assert model["status"]["capabilities"] == ["completion", "tools"]
    assert model["status"]["contextLength"] == 8192
    assert model["status"]["lastProbeTime"]
    # What kubectl describe shows: each transition once, with its reason in words.
    held_event = poll_reason(kubectl, "Agent", "cart", "Held")
    assert "smollm" in held_event["message"]
    assert poll_reason(kubectl, "Agent", "cart", "Released")["type"] == "Normal"
    assert "cart-tls" in poll_reason(kubectl, "Agent", "cart", "CertificateIssued")["message"]
    failed = poll_reason(kubectl, "InstallationModel", "smollm", "ProbeFailed")
    assert (failed["type"], failed["count"]) == ("Warning", 1)
    assert "completion" in poll_reason(kubectl, "InstallationModel", "smollm", "Served")["message"]

    # The same, counted on the operator's metrics port (this process held and released it).
    metrics = {
        sample.name + str(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(operator.metrics())
        for sample in family.samples
    }

    def value(name: str, **labels: str) -> float:
        return metrics.get(name + str(sorted(labels.items())), 0.0)

    assert value("ankka_operator_reconciles_total", kind="agent", outcome="ok") >= 2
    assert value("ankka_operator_reconciles_total", kind="model", outcome="ok") >= 1
    assert value("ankka_operator_agent_transitions_total", reason="Held") >= 1
    assert value("ankka_operator_agent_transitions_total", reason="Released") >= 1
    assert value("ankka_operator_hold_seconds_count") >= 1
    assert value("ankka_operator_release_seconds_count") >= 1
    assert value("ankka_operator_certificates_total", role="agent", action="issued") >= 1
    assert value("ankka_operator_certificates_total", role="gateway", action="issued") >= 1
    assert value("ankka_operator_probes_total", outcome="failed") >= 1
    assert value("ankka_operator_probes_total", outcome="served") >= 1
    assert value("process_resident_memory_bytes") > 0


def test_rendered_children_and_the_runtime_env(kubectl: Kubectl, shop: Path) -> None:
    deployment = eventually(lambda: kubectl.get("deployment", "cart", NS), what="cart's Deployment")
    for kind in ("service", "serviceaccount", "deployment"):
        child = kubectl.get(kind, "cart", NS)
        assert child is not None, kind
        (owner,) = child["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("Agent", "cart", True)
    pod = deployment["spec"]["template"]["spec"]
    (runtime,) = pod["containers"]
    assert runtime["name"] == "runtime"
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in runtime["env"]}
    assert env["ANKKA_MODELS_ADDRESS"] == f"https://ankka-gateway.{PLATFORM_NS}.svc:8443"
    assert env["ANKKA_MODEL_LOCAL_PRESET"] == "installation"
    assert env["ANKKA_MODEL_LOCAL_MODEL"] == "smollm"
    assert env["ANKKA_MODEL_CLAUDE_PRESET"] == "anthropic"
    assert env["ANKKA_MODEL_CLAUDE_API_KEY"] == {
        "secretKeyRef": {"name": "vendor-keys", "key": "anthropic"}
    }
    assert env["CART_CURRENCY"] == "EUR"
    # Two replicas on the PostgreSQL the example names (libpq's variables from its Secret).
    assert env["ANKKA_STORE"] == "postgresql://"
    assert env["PGPASSWORD"] == {"secretKeyRef": {"name": "cart-db", "key": "password"}}
    assert env["PGOPTIONS"] == "-c search_path=ankka_shop_cart"
    assert runtime["resources"] == {
        "requests": {"cpu": "200m", "memory": "256Mi"},
        "limits": {"memory": "512Mi"},
    }
    assert env["ANKKA_COMPACTION_LIMIT_CHARS"] == "8000"
    assert env["ANKKA_COMPACTION_KEEP_MESSAGES"] == "6"
    assert "subPath" not in runtime["volumeMounts"][0]
    secret = eventually(lambda: kubectl.get("secret", "cart-tls", NS), what="cart's certificate")
    assert certs.uris_of(secret_pair(secret).cert_pem) == ["ankka://service/shop/cart"]
    # It also serves the runtime's Service: every name the Service answers to.
    assert certs.dns_names_of(secret_pair(secret).cert_pem) == [
        "cart", "cart.shop", "cart.shop.svc", "cart.shop.svc.cluster.local"
    ]  # fmt: skip
    # The deployed model's server and the gateway's models file.
    assert kubectl.get("deployment", "qwen", NS) is not None
    assert kubectl.get("service", "qwen", NS) is not None
    cm = eventually(
        lambda: (
            (c := kubectl.get("configmap", "ankka-models", PLATFORM_NS))
            and "smollm" in c["data"]["models.yaml"]
            and "ankka://service/shop/cart" in c["data"]["models.yaml"]
            and c
        ),
        what="the models file",
    )
    rows = {r["name"]: r for r in yaml.safe_load(cm["data"]["models.yaml"])}
    assert rows["qwen"] == {
        "name": "qwen",
        "kind": "ollama",
        "url": "http://qwen.shop.svc:11434",
        "upstream_model": "qwen3:0.6b",
        # One gateway (the operator's default): each limit as the spec gives it.
        "max_concurrency": 4,
        "max_in_flight_per_caller": 2,
        "tokens_per_minute_per_caller": 20000,
        "callers": [],  # no Agent names it: the gateway serves it to nobody
    }
    # The Agents that name smollm may use it, and only they (issue 13, defect 12).
    assert "ankka://service/shop/cart" in rows["smollm"]["callers"]
    assert (
        rows["smollm"]["url"]
        == kubectl.get(  # type: ignore[index]
            "installationmodel", "smollm", NS
        )["spec"]["endpoint"]["url"]
    )
    tasks = kubectl.run("get", "tasks", "-n", NS).stdout
    assert "restock-report" in tasks
    assert "BUDGET" in tasks


def test_agent_whose_installation_model_sets_an_address_fails_with_no_children(
    kubectl: Kubectl, shop: Path
) -> None:
    agent = eventually(
        lambda: (
            (a := kubectl.get("agent", "misaddressed", NS))
            and (a.get("status") or {}).get("phase") == "Failed"
            and a
        ),
        what="misaddressed to fail",
    )
    ready = condition(agent, "Ready")
    assert ready["reason"] == "InvalidSpec"
    assert ready["message"].startswith("spec.models[0].address:")
    for kind, name in [
        ("deployment", "misaddressed"),
        ("service", "misaddressed"),
        ("serviceaccount", "misaddressed"),
        ("secret", "misaddressed-tls"),
    ]:
        assert kubectl.get(kind, name, NS) is None, kind


def test_an_agent_made_invalid_is_failed_and_runs_no_pods(kubectl: Kubectl, shop: Path) -> None:
    doc = {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": "turncoat", "namespace": NS},
        "spec": {
            "image": "i",
            "module": "m",
            "replicas": 1,
            "models": [{"name": "local", "installation": "smollm"}],
        },
    }
    kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(doc))
    eventually(
        lambda: (
            ((kubectl.get("deployment", "turncoat", NS) or {}).get("spec") or {}).get("replicas")
            == 1
        ),
        what="turncoat running",
    )
    doc["spec"]["models"][0]["apiKeySecretRef"] = {"name": "k", "key": "k"}  # type: ignore[index]
    kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(doc))
    agent = eventually(
        lambda: (
            (a := kubectl.get("agent", "turncoat", NS))
            and (a.get("status") or {}).get("phase") == "Failed"
            and a
        ),
        what="turncoat to fail",
    )
    assert condition(agent, "Ready")["message"].startswith("spec.models[0].apiKeySecretRef:")
    invalid = poll_reason(kubectl, "Agent", "turncoat", "InvalidSpec")
    assert invalid["type"] == "Warning"
    assert "spec.models[0].apiKeySecretRef" in invalid["message"]
    eventually(
        lambda: (kubectl.get("deployment", "turncoat", NS) or {})["spec"]["replicas"] == 0,
        what="turncoat scaled to 0",
    )


def test_certificate_is_renewed_before_expiry_and_key_always_matches(
    kubectl: Kubectl, shop: Path
) -> None:
    first = secret_pair(
        eventually(lambda: kubectl.get("secret", "cart-tls", NS), what="cart's certificate")
    )
    first_expiry = certs.not_after(first.cert_pem)
    seen: list[certs.KeyPair] = []

    def renewed() -> bool:
        pair = secret_pair(kubectl.get("secret", "cart-tls", NS))  # type: ignore[arg-type]
        assert certs.matches(pair), "the Secret held a key from another certificate"
        seen.append(pair)
        return pair.cert_pem != first.cert_pem

    eventually(renewed, what="cart's certificate to be renewed", timeout=40)
    assert dt.datetime.now(dt.UTC) < first_expiry, "renewed only after the old one expired"
    assert certs.uris_of(seen[-1].cert_pem) == ["ankka://service/shop/cart"]
    assert "renewed" in poll_reason(kubectl, "Agent", "cart", "CertificateRenewed")["message"]


def test_operator_restart_mid_reconcile_converges_without_duplicates(
    kubectl: Kubectl, operator: Operator, shop: Path
) -> None:
    names = [f"burst-{i}" for i in range(6)]
    docs = [
        {
            "apiVersion": "ankka.dev/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": n, "namespace": NS},
            "spec": {
                "image": "i",
                "module": "m",
                "replicas": 1,
                "models": [{"name": "local", "installation": "smollm"}],
            },
        }
        for n in names
    ]
    kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    eventually(
        lambda: (
            kubectl.items("deployment", NS, "app.kubernetes.io/name=agent")
            and any(
                d["metadata"]["name"].startswith("burst-")
                for d in kubectl.items("deployment", NS, "app.kubernetes.io/name=agent")
            )
        ),
        what="the first burst child",
        interval=0.05,
    )
    operator.kill()
    operator.start()

    def phase(name: str) -> Any:
        return ((kubectl.get("agent", name, NS) or {}).get("status") or {}).get("phase")

    eventually(
        lambda: all(phase(n) == "Progressing" for n in names),
        what="every burst Agent rendered",
        timeout=60,
    )
    for n in names:
        selector = f"app.kubernetes.io/instance={n}"
        assert len(kubectl.items("deployment", NS, selector)) == 1
        assert len(kubectl.items("service", NS, selector)) == 1
        certs_of = [
            s
            for s in kubectl.items("secret", NS, "ankka.dev/certificate=agent")
            if s["metadata"]["name"] == f"{n}-tls"
        ]
        assert len(certs_of) == 1
        assert certs.matches(secret_pair(certs_of[0]))


def test_deleting_an_agent_removes_what_it_owned(kubectl: Kubectl, shop: Path) -> None:
    eventually(
        lambda: kubectl.get("secret", "cart-tls", NS) and kubectl.get("deployment", "cart", NS),
        what="cart's children",
    )
    kubectl.run("delete", "agent", "cart", "-n", NS, "--wait=true", "--timeout=60s")
    owned = [
        ("deployment", "cart"),
        ("service", "cart"),
        ("serviceaccount", "cart"),
        ("secret", "cart-tls"),
    ]
    eventually(
        lambda: all(kubectl.get(kind, name, NS) is None for kind, name in owned),
        what="cart's children to be garbage-collected",
        timeout=60,
    )


def _owns_replicas(deployment: dict[str, Any], operation: str) -> bool:
    return any(
        entry.get("manager") == "ankka-operator"
        and entry.get("operation") == operation
        and "f:replicas" in (entry.get("fieldsV1") or {}).get("f:spec", {})
        for entry in deployment["metadata"].get("managedFields") or []
    )


def test_a_scale_by_patch_leaves_the_next_apply_in_charge(kubectl: Kubectl, shop: Path) -> None:
    doc = {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": "scaler", "namespace": NS},
        "spec": {
            "image": "i",
            "module": "m",
            "replicas": 1,
            "store": {"postgres": {"secretName": "scaler-db"}},  # more than one replica
            "models": [{"name": "local", "installation": "smollm"}],
        },
    }

    def deployment() -> dict[str, Any]:
        out = kubectl.run(
            "get",
            "deployment",
            "scaler",
            "-n",
            NS,
            "-o",
            "json",
            "--show-managed-fields",
            check=False,
        )
        found: dict[str, Any] = json.loads(out.stdout) if out.returncode == 0 else {}
        return found or {"metadata": {}, "spec": {}}

    kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(doc))
    eventually(lambda: deployment()["spec"].get("replicas") == 1, what="scaler running")
    # Only the replicas change: merge-patched (an Update), not applied whole.
    doc["spec"]["replicas"] = 3  # type: ignore[index]
    kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(doc))
    scaled = eventually(
        lambda: (d := deployment())["spec"].get("replicas") == 3 and d, what="scaler at 3"
    )
    assert _owns_replicas(scaled, "Update")
    assert scaled["metadata"]["annotations"]["ankka.dev/held"] == "false"
    # Anything else changes: the whole Deployment is applied, forced, and owns replicas again.
    doc["spec"]["image"] = "i2"  # type: ignore[index]
    kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(doc))
    applied = eventually(
        lambda: (
            (d := deployment())["spec"]["template"]["spec"]["containers"][0]["image"] == "i2" and d
        ),
        what="scaler's new image",
    )
    assert applied["spec"]["replicas"] == 3
    # The forced apply owns replicas again (shared with the patch's entry while the values
    # agree: the API server does not take a field from a manager that set the same value).
    assert _owns_replicas(applied, "Apply")
    # And the patch works again on top of that apply: the two never fight.
    doc["spec"]["replicas"] = 2  # type: ignore[index]
    kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(doc))
    again = eventually(
        lambda: (d := deployment())["spec"].get("replicas") == 2 and d, what="scaler at 2"
    )
    assert again["spec"]["template"]["spec"]["containers"][0]["image"] == "i2"
    kubectl.run("delete", "agent", "scaler", "-n", NS, "--wait=true", "--timeout=60s")
