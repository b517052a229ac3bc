"""The chart as a subchart of an umbrella chart, with a real helm: Helm's ``global`` values and
the ``enabled`` key of a ``condition`` pass the schema, ankka's own values reach it under
``ankka:``, and anything else is still refused. (An install of such an umbrella on a real node
is in tests/pods/test_workload.py.)"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.conftest import ROOT
from tests.cluster.controlplane import ControlPlane

UMBRELLA_CHART = """apiVersion: v2
name: platform
version: 1.0.0
dependencies:
  - name: ankka
    version: 0.1.0
    repository: file://{path}
    condition: ankka.enabled
"""
UMBRELLA_VALUES = """global:
  imageRegistry: registry.example
  storageClass: fast
ankka:
  enabled: true
  image: {repository: registry.example/ankka/ankka, tag: 0.1.0}
  gateway: {replicas: 2}
"""


def umbrella(directory: Path, values: str = UMBRELLA_VALUES) -> Path:
    """An umbrella chart depending on charts/ankka, as a platform team writes one."""
    chart = directory / "platform"
    chart.mkdir(parents=True, exist_ok=True)
    (chart / "Chart.yaml").write_text(UMBRELLA_CHART.format(path=ROOT / "charts" / "ankka"))
    (chart / "values.yaml").write_text(values)
    return chart


def helm(cp: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(cp.bin / "helm"), *args],
        env=cp.env(),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.fixture(scope="module")
def built(controlplane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    chart = umbrella(tmp_path_factory.mktemp("umbrella"))
    out = helm(controlplane, "dependency", "build", str(chart))
    assert out.returncode == 0, out.stderr
    return chart


def rendered(cp: ControlPlane, chart: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return helm(
        cp, "template", "platform", str(chart), "--namespace", "ankka-system",
        "--kube-version", "1.37.2", *args,
    )  # fmt: skip


def test_the_umbrella_renders_ankka_with_its_values_and_helms_globals(
    controlplane: ControlPlane, built: Path
) -> None:
    out = rendered(controlplane, built)
    assert out.returncode == 0, out.stderr
    docs: list[dict[str, Any]] = [d for d in yaml.safe_load_all(out.stdout) if d]
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    assert set(deployments) == {"ankka-operator", "ankka-gateway"}
    assert deployments["ankka-gateway"]["spec"]["replicas"] == 2
    image = deployments["ankka-operator"]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "registry.example/ankka/ankka:0.1.0"
    assert helm(controlplane, "lint", str(built)).returncode == 0


def test_the_umbrella_can_switch_ankka_off(controlplane: ControlPlane, built: Path) -> None:
    out = rendered(controlplane, built, "--set", "ankka.enabled=false")
    assert out.returncode == 0, out.stderr
    assert "ankka-operator" not in out.stdout


def test_a_mistyped_value_under_ankka_is_still_refused(
    controlplane: ControlPlane, built: Path
) -> None:
    out = rendered(controlplane, built, "--set", "ankka.gateway.replica=2")
    assert out.returncode != 0
    assert "replica" in out.stderr, out.stderr
