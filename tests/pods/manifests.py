"""The pods tier's manifests: the llama.cpp InstallationModel and Agents on ankka's images
(shared by ``tests/pods`` and ``bench/operator_scale.py --pods``)."""

from __future__ import annotations

from typing import Any

from tests.pods.conftest import image

NS = "shop"
MODEL = "smollm"
MODEL_FILE = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"
QUESTION = {"message": "What is the capital of France?"}
# llama.cpp's server as ankka local-model runs it: the model's own chat template (which /props
# reports capabilities from), one slot.
LLAMA_ARGS = [
    "--model", MODEL_FILE, "--alias", "smollm2", "--jinja",
    "--host", "0.0.0.0", "--port", "8080",
    "-c", "2048", "--threads", "1", "--parallel", "1",
]  # fmt: skip


def installation_model(namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "InstallationModel",
        "metadata": {"name": MODEL, "namespace": namespace},
        "spec": {
            "model": "smollm2",
            "server": {
                "kind": "llamacpp",
                "image": image("llama-server"),
                "port": 8080,
                "args": LLAMA_ARGS,
            },
            "probeIntervalSeconds": 10,
        },
    }


def agent(name: str, module: str, namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "image": image("weather"),
            "module": module,
            "replicas": 1,
            "models": [{"name": "default", "installation": MODEL}],
        },
    }
