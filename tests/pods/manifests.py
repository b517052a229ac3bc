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
# reports capabilities from), one slot. They are the container's args, so they go to the
# image's entrypoint (python3 -m ankka.local.llama_fallback /opt/llama/bin/llama-server), which
# starts the server with them and, if it dies of SIGILL/SIGSEGV/SIGBUS before it is ready (a
# node whose CPU reports AMX its kernel refuses), again with --no-repack added.
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


TASK_RESULT = {
    "title": "ankka",
    "points": ["ankka is an agent platform for Kubernetes, in Python."],
}
STANDIN_PORT = 8080
STANDIN_ARGS = [
    "ankka", "standin", "--script", "/app/examples/tasks-standin.json",
    "--host", "0.0.0.0", "--port", str(STANDIN_PORT),
]  # fmt: skip


def standin(namespace: str = NS, name: str = "standin") -> list[dict[str, Any]]:
    """The stand-in model server as a pod, answering examples/tasks-standin.json once (a test
    gives it another script with ``PUT /_standin/script``)."""
    labels = {"app.kubernetes.io/instance": name}
    meta = {"name": name, "namespace": namespace, "labels": labels}
    container = {
        "name": "standin",
        "image": image("weather"),
        "args": STANDIN_ARGS,
        "ports": [{"name": "http", "containerPort": STANDIN_PORT}],
        "readinessProbe": {"tcpSocket": {"port": "http"}},
    }
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {
                "selector": labels,
                "ports": [{"name": "http", "port": STANDIN_PORT, "targetPort": "http"}],
            },
        },
    ]


def task_agent(namespace: str = NS) -> dict[str, Any]:
    """examples.tasks (the autonomous agent researcher) in a pod, its model the stand-in."""
    model = {
        "name": "default",
        "preset": "openai-compatible",
        "address": f"http://standin.{namespace}.svc:{STANDIN_PORT}/v1",
        "model": "standin",
    }
    return {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": "research", "namespace": namespace},
        "spec": {
            "image": image("weather"),
            "module": "examples.tasks",
            "replicas": 1,
            "models": [model],
            # Its own SQLite (one replica), over the chart's shared PostgreSQL: both run here.
            "store": {"sqlite": {}},
        },
    }


def task(name: str, namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Task",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "agent": "research",
            "autonomousAgent": "researcher",
            "type": "summary",
            "instructions": "Summarise ankka.",
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
