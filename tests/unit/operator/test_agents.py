"""Agent rendering: refusals naming the field, holding, and the runtime container's env."""

from __future__ import annotations

from typing import Any

from ankka.api.resources import AgentSpec
from ankka.operator.agents import (
    agent_children,
    awaited_models,
    invalid_reason,
    release_patch,
    runtime_env,
)
from ankka.operator.settings import Settings

SETTINGS = Settings(namespace="platform")


def spec(**overrides: Any) -> AgentSpec:
    body: dict[str, Any] = {
        "image": "registry.example/shop:1",
        "module": "shop.agents",
        "replicas": 2,
        "models": [
            {"name": "local", "installation": "qwen"},
            {
                "name": "claude",
                "preset": "anthropic",
                "model": "claude-x",
                "apiKeySecretRef": {"name": "vendor-keys", "key": "anthropic"},
            },
        ],
        "env": [{"name": "SHOP_MODE", "value": "test"}],
    }
    body.update(overrides)
    return AgentSpec.model_validate(body)


def env_of(s: AgentSpec) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in runtime_env(s, SETTINGS)}


def test_installation_model_gets_preset_model_and_the_gateway_address() -> None:
    env = env_of(spec())
    assert env["ANKKA_MODELS_ADDRESS"] == "https://ankka-gateway.platform.svc:8443"
    assert env["ANKKA_MODEL_LOCAL_PRESET"] == "installation"
    assert env["ANKKA_MODEL_LOCAL_MODEL"] == "qwen"
    assert "ANKKA_MODEL_LOCAL_URL" not in env
    assert "ANKKA_MODEL_LOCAL_API_KEY" not in env


def test_hosted_preset_takes_its_key_from_the_secret_reference() -> None:
    env = env_of(spec())
    assert env["ANKKA_MODEL_CLAUDE_PRESET"] == "anthropic"
    assert env["ANKKA_MODEL_CLAUDE_API_KEY"] == {
        "secretKeyRef": {"name": "vendor-keys", "key": "anthropic"}
    }
    assert env["SHOP_MODE"] == "test"


def test_installation_model_with_an_address_is_refused_naming_the_field() -> None:
    s = spec(models=[{"name": "local", "installation": "qwen", "address": "http://x"}])
    reason = invalid_reason(s)
    assert reason is not None
    assert reason.startswith("spec.models[0].address:")


def test_installation_model_with_a_key_is_refused_naming_the_field() -> None:
    s = spec(
        models=[
            {"name": "ok", "preset": "openai"},
            {"name": "local", "installation": "q", "apiKeySecretRef": {"name": "k", "key": "k"}},
        ]
    )
    reason = invalid_reason(s)
    assert reason is not None
    assert reason.startswith("spec.models[1].apiKeySecretRef:")


def test_a_model_naming_nothing_is_refused() -> None:
    assert invalid_reason(spec(models=[{"name": "x"}])) is not None
    assert invalid_reason(spec()) is None


def test_awaited_models_are_the_unserved_installations() -> None:
    s = spec()
    assert awaited_models(s, {}) == ["qwen"]
    assert awaited_models(s, {"qwen": False}) == ["qwen"]
    assert awaited_models(s, {"qwen": True}) == []


def test_held_agent_renders_a_deployment_with_no_replicas() -> None:
    held = agent_children(
        namespace="shop", name="cart", uid="u1", spec=spec(), settings=SETTINGS, held=True
    )
    released = agent_children(
        namespace="shop", name="cart", uid="u1", spec=spec(), settings=SETTINGS, held=False
    )
    kinds = [o["kind"] for o in held]
    assert kinds == [
        "ServiceAccount",  # the runtime's
        "ServiceAccount",  # ankka approve's delegate
        "ConfigMap",  # the access file, before the pods that mount it
        "Service",
        "Deployment",
        "NetworkPolicy",
    ]
    assert held[4]["spec"]["replicas"] == 0
    assert released[4]["spec"]["replicas"] == 2


def test_children_are_owned_and_the_certificate_is_mounted_without_subpath() -> None:
    children = agent_children(
        namespace="shop", name="cart", uid="u1", spec=spec(), settings=SETTINGS, held=False
    )
    for child in children:
        (owner,) = child["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == ("Agent", "u1", True)
    pod = children[4]["spec"]["template"]["spec"]
    mount = pod["containers"][0]["volumeMounts"][0]
    assert "subPath" not in mount
    assert pod["volumes"][0]["secret"]["secretName"] == "cart-tls"
    assert pod["serviceAccountName"] == "cart"


def test_the_runtime_container_serves_the_agents_module_on_its_port() -> None:
    children = agent_children(
        namespace="shop", name="cart", uid="u1", spec=spec(), settings=SETTINGS, held=False
    )
    (container,) = children[4]["spec"]["template"]["spec"]["containers"]
    # `ankka serve MODULE --host 0.0.0.0 --port 8080`, MODULE expanded by Kubernetes from env.
    assert container["args"][:3] == ["ankka", "serve", "$(ANKKA_MODULE)"]
    assert container["args"][3:7] == ["--host", "0.0.0.0", "--port", "8080"]
    assert env_of(spec())["ANKKA_MODULE"] == "shop.agents"


def test_the_runtime_serves_mtls_with_the_agent_s_certificate_and_probes_on_a_plain_port() -> None:
    children = agent_children(
        namespace="shop", name="cart", uid="u1", spec=spec(), settings=SETTINGS, held=False
    )
    service, deployment = children[3], children[4]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert "--trust-network" not in args
    mount = container["volumeMounts"][0]
    assert (mount["name"], args[args.index("--tls-dir") + 1]) == ("tls", mount["mountPath"])
    assert args[args.index("--probe-port") + 1] == "8081"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"https": 8080, "probe": 8081}
    # kubelet has no client certificate: it probes the plain port, which answers nothing else.
    assert container["readinessProbe"] == {"httpGet": {"path": "/readyz", "port": "probe"}}
    # The Service reaches the TLS port only.
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "https"}]


def test_the_runtime_pod_gets_no_service_link_variables() -> None:
    # A Service named ankka-model-x would add ANKKA_MODEL_X_PORT=tcp://... to the runtime's env.
    children = agent_children(
        namespace="shop", name="cart", uid="u1", spec=spec(), settings=SETTINGS, held=False
    )
    assert children[4]["spec"]["template"]["spec"]["enableServiceLinks"] is False


def test_the_runtime_keeps_its_sessions_on_a_volume_of_its_own() -> None:
    # The image's working directory belongs to root; the runtime runs as a non-root user.
    children = agent_children(
        namespace="shop", name="cart", uid="u1", spec=spec(), settings=SETTINGS, held=False
    )
    pod = children[4]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ANKKA_STORE"] == "sqlite:////var/lib/ankka/sessions.sqlite3"
    assert "--store" not in container["args"]
    assert {"name": "data", "mountPath": "/var/lib/ankka"} in container["volumeMounts"]
    assert {"name": "data", "emptyDir": {}} in pod["volumes"]


def test_spec_compaction_reaches_the_runtime_as_its_compaction_settings() -> None:
    env = env_of(spec(compaction={"limitChars": 8000, "keepMessages": 4, "model": "local"}))
    assert env["ANKKA_COMPACTION_LIMIT_CHARS"] == "8000"
    assert env["ANKKA_COMPACTION_KEEP_MESSAGES"] == "4"
    assert env["ANKKA_COMPACTION_MODEL"] == "local"
    assert "ANKKA_COMPACTION_INSTRUCTIONS" not in env
    from ankka.runtime.declare.compaction import from_environment

    assert from_environment(env).apply(None) is not None


def test_a_release_or_hold_alone_is_a_patch_of_replicas_and_the_held_annotation() -> None:
    def deployment(*, held: bool, **overrides: Any) -> dict[str, Any]:
        children = agent_children(
            namespace="shop",
            name="cart",
            uid="u1",
            spec=spec(**overrides),
            settings=SETTINGS,
            held=held,
        )
        return children[4]

    held, released = deployment(held=True), deployment(held=False)
    assert release_patch(held, released) == {
        "metadata": {"annotations": {"ankka.dev/held": "false"}},
        "spec": {"replicas": 2},
    }
    assert release_patch(released, held) == {
        "metadata": {"annotations": {"ankka.dev/held": "true"}},
        "spec": {"replicas": 0},
    }
    assert release_patch(released, deployment(held=False, replicas=3)) == {"spec": {"replicas": 3}}
    assert release_patch(held, held) is None  # nothing to write
    # Anything else changed: the whole object is applied.
    assert release_patch(held, deployment(held=False, image="registry.example/shop:2")) is None
    other_owner = agent_children(
        namespace="shop", name="cart", uid="u2", spec=spec(), settings=SETTINGS, held=False
    )[4]
    assert release_patch(held, other_owner) is None
    service = agent_children(
        namespace="shop", name="cart", uid="u1", spec=spec(), settings=SETTINGS, held=False
    )[3]
    assert (other_owner["kind"], service["kind"]) == ("Deployment", "Service")
    assert release_patch(service, service | {"spec": {}}) is None


def test_the_runtime_is_told_its_public_address_and_its_remote_a2a_agents() -> None:
    s = AgentSpec.model_validate(
        {
            "image": "img",
            "module": "svc",
            "remoteAgents": [
                {
                    "name": "kagent-helper",
                    "cardUrl": "https://helper.kagent.svc/.well-known/agent-card.json",
                    "tokenSecret": {"name": "helper-token", "key": "token"},
                }
            ],
        }
    )
    rendered = runtime_env(s, SETTINGS, namespace="shop", name="cart")
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in rendered}
    assert env["ANKKA_PUBLIC_URL"] == "https://cart.shop.svc:443"
    prefix = "ANKKA_A2A_REMOTE_KAGENT_HELPER_"
    assert env[prefix + "CARD_URL"] == "https://helper.kagent.svc/.well-known/agent-card.json"
    assert env[prefix + "TOKEN"] == {"secretKeyRef": {"name": "helper-token", "key": "token"}}


def test_a_rendered_agent_shows_its_a2a_card_url() -> None:
    import datetime as dt

    from ankka.operator.agent_status import Issued, rendered_status
    from ankka.operator.agents import a2a_card_url

    status = rendered_status(
        None,
        awaited=[],
        replicas=1,
        deployment=None,
        certificate=Issued("2030-01-01T00:00:00Z", "2029-09-01T00:00:00Z", "p"),
        generation=1,
        now=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        a2a_card_url=a2a_card_url("shop", "cart"),
    )
    assert status["a2aCardUrl"] == "https://cart.shop.svc:443/.well-known/agent-card.json"
