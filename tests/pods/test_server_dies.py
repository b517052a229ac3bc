"""A model server container that dies of SIGILL at every start, on a real node: the image's
entrypoint tries both ways and ends the container with 132 and its report, the kubelet keeps
restarting it, and the operator pod names the signal in the InstallationModel's
``ServerRunning`` condition.

The machine here has no AMX, so the dying server is a stand-in: a Python one-liner that kills
itself with SIGILL after printing llama.cpp's last line, run by the very entrypoint the
llama-server image runs (``python3 -m ankka.local.llama_fallback``, here from ankka's own
image, which has ankka installed). Everything else is real: the kubelet's restarts and
termination message, the operator's read of the pods with the chart's RBAC, the condition.
"""

from __future__ import annotations

from typing import Any

from tests.pods.conftest import Cluster, image
from tests.support.eventually import eventually

NS = "dying"
MODEL = "crashy"
DIES = (
    "print('llama threadpool init, n_threads = 1', flush=True); "
    "import os, signal; os.kill(os.getpid(), signal.SIGILL)"
)


def _condition(cluster: Cluster, kind: str) -> dict[str, Any]:
    model = cluster.kubectl.get("installationmodel", MODEL, NS) or {}
    for c in (model.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return {}


def test_a_model_whose_server_dies_of_sigill_every_start_says_so(
    cluster: Cluster, helm_release: str
) -> None:
    cluster.kubectl.run("create", "namespace", NS)
    cluster.apply(
        {
            "apiVersion": "ankka.dev/v1alpha1",
            "kind": "InstallationModel",
            "metadata": {"name": MODEL, "namespace": NS},
            "spec": {
                "model": "smollm2",
                "server": {
                    "kind": "llamacpp",
                    "image": image("weather"),
                    "port": 8080,
                    "args": [
                        "python3", "-m", "ankka.local.llama_fallback",
                        "python3", "-c", DIES, "--host", "0.0.0.0", "--port", "8080",
                    ],
                },
            },
        }
    )  # fmt: skip

    def dying() -> dict[str, Any] | None:
        running = _condition(cluster, "ServerRunning")
        return running if running.get("status") == "False" else None

    running = eventually(dying, what="the model's ServerRunning=False", timeout=180)
    assert running is not None
    message = running["message"]
    assert "the server container died of illegal instruction (SIGILL) (exit code 132)" in message
    # The entrypoint's report, as the container's termination message: both ways, by name.
    assert "1. as built: it died of illegal instruction (SIGILL) before it was ready" in message
    assert "2. with --no-repack: it died of illegal instruction (SIGILL) before it was ready" in (
        message
    )
    assert _condition(cluster, "Served").get("status") == "False"
    cluster.kubectl.run("delete", "namespace", NS, "--wait=false")
