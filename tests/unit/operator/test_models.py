"""InstallationModel rendering: server children, the gateway's models file, probe status."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from ankka.api.capabilities import Capability, ModelCapabilities
from ankka.api.resources import InstallationModelSpec
from ankka.operator.models import (
    models_configmap,
    models_file,
    probe_target,
    served_status,
    server_children,
    status_worth_writing,
)
from ankka.operator.objects import condition_status
from ankka.operator.settings import Settings

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


def spec(**body: Any) -> InstallationModelSpec:
    return InstallationModelSpec.model_validate({"model": "qwen3:0.6b", **body})


def test_deployed_server_renders_deployment_and_service_on_the_kind_default_port() -> None:
    s = spec(
        server={
            "kind": "ollama",
            "image": "ollama/ollama:0.9",
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        }
    )
    deployment, service, account = server_children("models", "qwen", "u1", s)
    assert account["kind"] == "ServiceAccount" and account["automountServiceAccountToken"] is False
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"][0]["containerPort"] == 11434
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    assert service["spec"]["ports"][0]["port"] == 11434
    assert probe_target("models", "qwen", s).url == "http://qwen.models.svc:11434"
    assert deployment["spec"]["template"]["spec"]["enableServiceLinks"] is False


def test_adopted_endpoint_renders_no_children() -> None:
    s = spec(endpoint={"url": "http://127.0.0.1:9999/", "kind": "ollama"})
    assert server_children("models", "qwen", "u1", s) == []
    assert probe_target("models", "qwen", s).url == "http://127.0.0.1:9999"


def test_models_file_lists_every_model_sorted_with_declared_capabilities_for_openai() -> None:
    vllm = spec(
        server={"kind": "vllm", "image": "vllm/vllm-openai"},
        capabilities=["completion", "tools"],
        maxConcurrency=4,
    )
    ollama = spec(endpoint={"url": "http://o:11434"})
    text = models_file([probe_target("m", "zeta", vllm), probe_target("m", "alpha", ollama)])
    rows = yaml.safe_load(text)
    assert [r["name"] for r in rows] == ["alpha", "zeta"]
    # The gateway is asked for "alpha"; it asks the server for the server's own tag.
    assert rows[0] == {
        "name": "alpha",
        "kind": "ollama",
        "url": "http://o:11434",
        "upstream_model": "qwen3:0.6b",
    }
    assert rows[1]["kind"] == "openai"
    assert rows[1]["capabilities"] == ["completion", "tools"]
    assert rows[1]["max_concurrency"] == 4


def limited(**limits: int) -> InstallationModelSpec:
    return spec(endpoint={"url": "http://o:11434"}, **limits)


def rendered_limits(gateways: int, **limits: int) -> dict[str, Any]:
    configmap = models_configmap(
        Settings(gateway_replicas=gateways), [probe_target("m", "alpha", limited(**limits))]
    )
    (row,) = yaml.safe_load(configmap["data"]["models.yaml"])
    keys = ("max_concurrency", "max_in_flight_per_caller", "tokens_per_minute_per_caller")
    return {k: row[k] for k in keys if k in row}


SPEC_LIMITS = {"maxConcurrency": 5, "maxInFlightPerCaller": 3, "tokensPerMinutePerCaller": 20001}


@pytest.mark.parametrize(
    ("gateways", "each"),
    [
        # One gateway enforces the spec's limits as they are.
        (1, (5, 3, 20001)),
        # Two allow 2 + 2 = 4 of 5 at once (never more than the limit), 1 + 1 of a caller's
        # 3 requests, 10,000 + 10,000 of its 20,001 tokens a minute.
        (2, (2, 1, 10000)),
        (4, (1, 1, 5000)),
    ],
)
def test_each_gateway_replica_gets_its_share_of_every_limit_rounded_down(
    gateways: int, each: tuple[int, int, int]
) -> None:
    keys = ("max_concurrency", "max_in_flight_per_caller", "tokens_per_minute_per_caller")
    assert rendered_limits(gateways, **SPEC_LIMITS) == dict(zip(keys, each, strict=True))
    assert rendered_limits(gateways) == {}  # no limit stays no limit


def test_a_limit_below_the_replicas_still_lets_each_serve_one() -> None:
    assert rendered_limits(3, maxConcurrency=2) == {"max_concurrency": 1}


def test_an_installation_model_refuses_a_limit_below_one() -> None:
    for field in ("maxConcurrency", "maxInFlightPerCaller", "tokensPerMinutePerCaller"):
        with pytest.raises(ValidationError, match=field):
            limited(**{field: 0})


def test_a_successful_probe_sets_served_capabilities_and_context() -> None:
    s = spec(endpoint={"url": "http://o:11434"})
    caps = ModelCapabilities(
        model="qwen3:0.6b",
        capabilities=frozenset({Capability.COMPLETION, Capability.TOOLS}),
        context_length=40960,
    )
    status = served_status(
        {}, spec=s, target=probe_target("m", "q", s), probed=caps, error=None, generation=1, now=NOW
    )
    assert condition_status(status, "Served") == "True"
    assert condition_status(status, "Deployed") == "True"
    assert status["capabilities"] == ["completion", "tools"]
    assert status["contextLength"] == 40960
    assert status["lastProbeTime"] == "2026-01-01T12:00:00Z"


def test_a_failed_probe_is_served_false_with_the_reason_and_keeps_transition_time() -> None:
    s = spec(endpoint={"url": "http://o:11434"})
    target = probe_target("m", "q", s)
    first = served_status(
        {}, spec=s, target=target, probed=None, error="HTTP 404", generation=1, now=NOW
    )
    later = served_status(
        first,
        spec=s,
        target=target,
        probed=None,
        error="HTTP 404",
        generation=1,
        now=NOW + dt.timedelta(minutes=5),
    )
    (served,) = [c for c in later["conditions"] if c["type"] == "Served"]
    assert served["status"] == "False"
    assert served["message"] == "HTTP 404"
    assert served["lastTransitionTime"] == "2026-01-01T12:00:00Z"


def test_an_identical_failed_probe_is_not_rewritten_until_the_interval_passes() -> None:
    s = spec(endpoint={"url": "http://o:11434"}, probeIntervalSeconds=60)
    target = probe_target("m", "q", s)
    first = served_status(
        {}, spec=s, target=target, probed=None, error="HTTP 503", generation=1, now=NOW
    )
    again = served_status(
        first,
        spec=s,
        target=target,
        probed=None,
        error="HTTP 503",
        generation=1,
        now=NOW + dt.timedelta(seconds=1),
    )
    assert not status_worth_writing(first, again, spec=s, now=NOW + dt.timedelta(seconds=1))
    assert status_worth_writing(first, again, spec=s, now=NOW + dt.timedelta(seconds=60))
    other = served_status(
        first,
        spec=s,
        target=target,
        probed=None,
        error="HTTP 404",
        generation=1,
        now=NOW + dt.timedelta(seconds=1),
    )
    assert status_worth_writing(first, other, spec=s, now=NOW + dt.timedelta(seconds=1))


def test_a_failed_probe_is_compared_with_the_status_as_stored_without_its_null_fields() -> None:
    s = spec(endpoint={"url": "http://o:11434"}, probeIntervalSeconds=60)
    target = probe_target("m", "q", s)
    written = served_status(
        {}, spec=s, target=target, probed=None, error="HTTP 503", generation=1, now=NOW
    )
    # The merge patch removes a null field, so what is read back lacks contextLength.
    stored = {k: v for k, v in written.items() if v is not None}
    assert "contextLength" not in stored
    later = NOW + dt.timedelta(seconds=1)
    again = served_status(
        stored, spec=s, target=target, probed=None, error="HTTP 503", generation=1, now=later
    )
    assert not status_worth_writing(stored, again, spec=s, now=later)
