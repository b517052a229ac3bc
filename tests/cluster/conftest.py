"""Fixtures of the cluster tier: a real control plane, the chart installed with a real helm,
the operator run as a local kopf process with the chart's own ServiceAccount token, and a
stand-in model server on loopback answering ``/api/show``.

There is no kubelet, so pods never run: the operator runs here, and a model is proved served by
an InstallationModel whose ``endpoint`` is the stand-in. Missing binaries fail the session.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.cluster.controlplane import ControlPlane, start
from tests.support.eventually import eventually
from tests.support.http_reply import send_json

ROOT = Path(__file__).resolve().parents[2]
PLATFORM_NS = "ankka-system"
CERT_LIFETIME_SECONDS = 20


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.cluster)


def agent_manifest(name: str, namespace: str, image: str, module: str, **spec: Any) -> str:
    """An Agent as ``kubectl apply -f -`` takes it (YAML), ``spec`` its other fields."""
    body = {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"image": image, "module": module, **spec},
    }
    return yaml.safe_dump(body)


@pytest.fixture(scope="package")  # torn down when the tier ends, not the session
def controlplane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    workdir = tmp_path_factory.mktemp("controlplane")
    try:
        with start(workdir) as cp:
            yield cp
    except RuntimeError as exc:
        pytest.fail(str(exc))


class Kubectl:
    """kubectl against the test cluster, answering parsed JSON."""

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp

    def run(
        self, *args: str, check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return self.cp.kubectl(*args, check=check, stdin=stdin)

    def get(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        out = self.run("get", kind, name, "-n", namespace, "-o", "json", check=False)
        if out.returncode != 0:
            if "NotFound" in out.stderr:
                return None
            raise AssertionError(f"kubectl get {kind} {name}: {out.stderr}")
        result: dict[str, Any] = json.loads(out.stdout)
        return result

    def items(self, kind: str, namespace: str, selector: str = "") -> list[dict[str, Any]]:
        args = ["get", kind, "-n", namespace, "-o", "json"]
        if selector:
            args += ["-l", selector]
        items: list[dict[str, Any]] = json.loads(self.run(*args).stdout)["items"]
        return items


@pytest.fixture(scope="package")  # torn down when the tier ends, not the session
def kubectl(controlplane: ControlPlane) -> Kubectl:
    return Kubectl(controlplane)


@pytest.fixture(scope="package")  # torn down when the tier ends, not the session
def helm_release(controlplane: ControlPlane) -> str:
    out = subprocess.run(
        [
            str(controlplane.bin / "helm"),
            "install",
            "ankka",
            str(ROOT / "charts" / "ankka"),
            "--namespace",
            PLATFORM_NS,
            "--create-namespace",
            "--wait=false",
        ],
        env=controlplane.env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, f"helm install failed:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def _operator_kubeconfig(cp: ControlPlane, kubectl: Kubectl) -> Path:
    """A kubeconfig with a token of the chart's ServiceAccount: the operator gets only the
    chart's RBAC, so the tests prove the chart grants enough."""
    token = kubectl.run(
        "create", "token", "ankka-operator", "-n", PLATFORM_NS, "--duration", "4h"
    ).stdout.strip()
    path = cp.workdir / "operator.kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {{server: "{cp.server}", certificate-authority: "{cp.workdir / "pki" / "ca.crt"}"}}
users:
- name: operator
  user: {{token: "{token}"}}
contexts:
- name: test
  context: {{cluster: test, user: operator}}
current-context: test
""")
    return path


class Operator:
    """The operator as a child process (``python -m ankka.operator``); restartable."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = env
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ankka.operator", "--verbose"],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )

    def kill(self) -> None:
        """SIGKILL: no cleanup, as a crashed or evicted operator would stop."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def metrics(self) -> str:
        """The running operator's /metrics (its metrics port, as its last start printed)."""
        found = re.findall(r"metrics on (http://\S+/metrics)", self.log.read_text(errors="replace"))
        assert found, "the operator printed no metrics address:\n" + self.log_tail()
        answer = httpx.get(found[-1], timeout=10)
        answer.raise_for_status()
        return answer.text


@pytest.fixture(scope="package")  # torn down when the tier ends, not the session
def operator(controlplane: ControlPlane, kubectl: Kubectl, helm_release: str) -> Iterator[Operator]:
    env = dict(os.environ)
    env.update(
        {
            "KUBECONFIG": str(_operator_kubeconfig(controlplane, kubectl)),
            "PYTHONPATH": str(ROOT),
            "ANKKA_NAMESPACE": PLATFORM_NS,
            "ANKKA_OPERATOR_CERT_LIFETIME_SECONDS": str(CERT_LIFETIME_SECONDS),
            "ANKKA_OPERATOR_CERT_CHECK_SECONDS": "1",
            "ANKKA_OPERATOR_PROBE_TICK_SECONDS": "0.5",
            "ANKKA_OPERATOR_AGENT_RESYNC_SECONDS": "30",
            "ANKKA_OPERATOR_TEAM_REFRESH_SECONDS": "0.5",
            "ANKKA_OPERATOR_METRICS_PORT": "0",
            "ANKKA_OPERATOR_METRICS_HOST": "127.0.0.1",
        }
    )
    op = Operator(env, controlplane.workdir / "operator.log")
    op.start()
    eventually(
        lambda: kubectl.get("secret", "ankka-ca", PLATFORM_NS) or not op.alive(),
        what="the operator to create the platform CA",
        timeout=60,
    )
    assert op.alive(), "the operator exited at start:\n" + op.log_tail()
    yield op
    op.stop()


class StandIn:
    """A model server on loopback answering Ollama's ``/api/show``; 503 until ``serve()``."""

    def __init__(self) -> None:
        self.serving = False
        self.shows = 0
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                if self.path != "/api/show":
                    self.send_error(404)
                    return
                stand_in.shows += 1
                if not stand_in.serving:
                    self.send_error(503, "model still loading")
                    return
                send_json(
                    self,
                    {
                        "capabilities": ["completion", "tools"],
                        "model_info": {"llama.context_length": 8192},
                    },
                )

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def serve(self) -> None:
        self.serving = True


@pytest.fixture(scope="package")  # torn down when the tier ends, not the session
def stand_in() -> Iterator[StandIn]:
    s = StandIn()
    s.thread.start()
    yield s
    s.server.shutdown()
    s.server.server_close()
    s.thread.join(timeout=5)
