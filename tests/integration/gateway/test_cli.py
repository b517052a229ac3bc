"""``ankka gateway`` as the Helm chart and a person start it: options, environment, refusals."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.integration.gateway.conftest import write_models
from tests.support.processes import ankka_command, started

pytestmark = pytest.mark.integration


def test_it_refuses_to_start_without_choosing_tls_or_insecure(tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    write_models(models, [])

    done = subprocess.run(
        ankka_command("gateway", "--models", str(models)), capture_output=True, text=True
    )

    assert done.returncode == 2
    assert "--tls-dir DIR" in done.stderr
    assert "--insecure" in done.stderr


def test_a_broken_models_file_stops_the_start_naming_the_problem(tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text("models: [{name: a, kind: ollama}]\n")

    done = subprocess.run(
        ankka_command("gateway", "--models", str(models), "--insecure"),
        capture_output=True,
        text=True,
    )

    assert done.returncode == 2
    assert "'url'" in done.stderr


def test_options_come_from_the_environment_as_the_chart_sets_them(tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    write_models(models, [])
    env = {"ANKKA_GATEWAY_MODELS_FILE": str(models), "ANKKA_GATEWAY_PORT": "0"}

    with started(ankka_command("gateway", "--insecure"), env=env) as gateway:
        assert gateway.url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{gateway.url}/readyz").json() == {"ready": True, "models": {}}


# Kubernetes sets these in every pod of a namespace with a Service named ankka-gateway
# (service links); they are not settings.
SERVICE_LINKS = {
    "ANKKA_GATEWAY_PORT": "tcp://10.0.0.169:8443",
    "ANKKA_GATEWAY_PORT_8443_TCP": "tcp://10.0.0.169:8443",
    "ANKKA_GATEWAY_SERVICE_HOST": "10.0.0.169",
    "ANKKA_GATEWAY_SERVICE_PORT": "8443",
    "ANKKA_GATEWAY_HEALTH_PORT": "tcp://10.0.0.169:9090",
}


def test_service_link_variables_are_ignored_and_the_listen_port_is_used(tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    write_models(models, [])
    env = {
        **SERVICE_LINKS,
        "ANKKA_GATEWAY_MODELS_FILE": str(models),
        "ANKKA_GATEWAY_LISTEN_PORT": "0",
        "ANKKA_GATEWAY_LISTEN_HEALTH_PORT": "0",
    }

    with started(ankka_command("gateway", "--insecure"), env=env) as gateway:
        assert not gateway.url.endswith(":8443")
        assert httpx.get(f"{gateway.url}/readyz").json() == {"ready": True, "models": {}}


def test_every_subcommand_starts_with_service_links_in_the_environment() -> None:
    # The operator pod crash-looped: building the gateway's options read ANKKA_GATEWAY_PORT.
    for command in ("operator", "serve", "standin", "gateway"):
        done = subprocess.run(
            ankka_command(command, "--help"),
            capture_output=True,
            text=True,
            env={**os.environ, **SERVICE_LINKS},
        )
        assert done.returncode == 0, f"ankka {command} --help: {done.stderr}"


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        (
            "ANKKA_GATEWAY_LISTEN_PORT",
            "https",
            "ANKKA_GATEWAY_LISTEN_PORT='https' is not a port number",
        ),
        (
            "ANKKA_GATEWAY_SERVER",
            "hypercorn",
            "ANKKA_GATEWAY_SERVER='hypercorn': choose raw or uvicorn",
        ),
    ],
)
def test_a_setting_from_the_environment_that_is_wrong_is_refused_by_name(
    tmp_path: Path, variable: str, value: str, says: str
) -> None:
    models = tmp_path / "models.yaml"
    write_models(models, [])

    done = subprocess.run(
        ankka_command("gateway", "--models", str(models), "--insecure"),
        capture_output=True,
        text=True,
        env={**os.environ, variable: value},
    )

    assert done.returncode == 2
    assert says in done.stderr
