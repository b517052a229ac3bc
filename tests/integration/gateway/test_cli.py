"""``ankka gateway`` as the Helm chart and a person start it: options, environment, refusals."""

from __future__ import annotations

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
