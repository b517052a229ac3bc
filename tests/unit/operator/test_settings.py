"""Operator settings from the environment, and when a model is probed again."""

from __future__ import annotations

import datetime as dt

import pytest

from ankka._kernel.errors import ConfigurationError
from ankka.operator.reconcile import probe_is_due
from ankka.operator.settings import Settings

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


def test_settings_read_the_environment_and_give_the_models_address() -> None:
    s = Settings.from_env({"ANKKA_NAMESPACE": "plat", "ANKKA_OPERATOR_CERT_LIFETIME_SECONDS": "30"})
    assert s.models_address == "https://ankka-gateway.plat.svc:8443"
    assert s.certificate_lifetime == dt.timedelta(seconds=30)


def test_a_setting_that_is_not_a_number_is_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match="ANKKA_OPERATOR_PROBE_TICK_SECONDS='soon'"):
        Settings.from_env({"ANKKA_OPERATOR_PROBE_TICK_SECONDS": "soon"})


def test_network_policies_and_token_review_can_be_switched_off() -> None:
    s = Settings.from_env(
        {"ANKKA_OPERATOR_NETWORK_POLICIES": "false", "ANKKA_TOKEN_REVIEW_URL": ""}
    )
    assert (s.network_policies, s.token_review_url) == (False, "")
    assert Settings.from_env({}).network_policies is True
    with pytest.raises(ConfigurationError, match="ANKKA_OPERATOR_NETWORK_POLICIES='off'"):
        Settings.from_env({"ANKKA_OPERATOR_NETWORK_POLICIES": "off"})


def model(served: str | None, last: str | None, interval: int = 60) -> dict[str, object]:
    status: dict[str, object] = {}
    if served is not None:
        status["conditions"] = [{"type": "Served", "status": served}]
    if last is not None:
        status["lastProbeTime"] = last
    return {
        "spec": {"model": "m", "endpoint": {"url": "http://m"}, "probeIntervalSeconds": interval},
        "status": status,
    }


def test_unserved_models_are_probed_every_tick() -> None:
    assert probe_is_due(model(None, None), now=NOW)
    assert probe_is_due(model("False", "2026-01-01T12:00:00Z"), now=NOW)


def test_served_models_wait_for_their_probe_interval() -> None:
    assert not probe_is_due(model("True", "2026-01-01T11:59:30Z"), now=NOW)
    assert probe_is_due(model("True", "2026-01-01T11:59:00Z"), now=NOW)


def test_the_metrics_port_is_off_unless_set_and_must_be_a_port() -> None:
    assert Settings.from_env({}).metrics_port is None
    assert Settings.from_env({"ANKKA_OPERATOR_METRICS_PORT": "9091"}).metrics_port == 9091
    assert Settings.from_env({"ANKKA_OPERATOR_METRICS_PORT": "0"}).metrics_port == 0
    for bad in ("metrics", "-1", "70000"):
        with pytest.raises(ConfigurationError, match="ANKKA_OPERATOR_METRICS_PORT"):
            Settings.from_env({"ANKKA_OPERATOR_METRICS_PORT": bad})


def test_the_gateway_replicas_are_one_unless_set_and_a_whole_number_of_at_least_one() -> None:
    assert Settings.from_env({}).gateway_replicas == 1
    assert Settings.from_env({"ANKKA_GATEWAY_REPLICAS": "3"}).gateway_replicas == 3
    for bad in ("0", "two", "-2", "1.5"):
        with pytest.raises(ConfigurationError, match=f"ANKKA_GATEWAY_REPLICAS='{bad}'"):
            Settings.from_env({"ANKKA_GATEWAY_REPLICAS": bad})
