"""The API server's write rate, the floor under the operator's release latency.

Starts the cluster tier's control plane (``scripts/controlplane.sh build`` first) and
server-side-applies ``--objects`` Deployments (0 replicas) twice, create then update, through
two clients in turn, two rounds: the operator's seam (``ankka.operator.kube.Kube``: the
official synchronous client in 32 threads) and an asyncio client (aiohttp, 64 requests in
flight over at most 32 connections). Prints requests per second and this process's CPU per
request for each. If the asyncio client is not faster here, a faster client cannot shorten the
operator's release, only its CPU.

Run: ``PYTHONPATH=. python bench/kube_write_rate.py [--objects 600]`` (aiohttp: extra
``bench-kube``; kopf already depends on it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes.config import kube_config

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ankka.operator.kube import Kube  # noqa: E402
from tests.cluster.controlplane import start  # noqa: E402


def deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }


async def through_seam(kube: Kube, names: list[str]) -> tuple[float, float]:
    t, cpu = time.monotonic(), time.process_time()
    await asyncio.gather(*(kube.apply(deployment(n)) for n in names))
    return len(names) / (time.monotonic() - t), (time.process_time() - cpu) / len(names)


async def through_aiohttp(kube: Kube, names: list[str]) -> tuple[float, float]:
    cfg = kube._api.configuration  # the same kubeconfig, TLS files and token
    context = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
    if cfg.cert_file:
        context.load_cert_chain(cfg.cert_file, cfg.key_file)
    headers = {"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"}
    if cfg.api_key.get("authorization"):
        headers["Authorization"] = cfg.api_key["authorization"]
    connector = aiohttp.TCPConnector(ssl=context, limit=32)
    async with aiohttp.ClientSession(connector=connector) as session:
        gate = asyncio.Semaphore(64)

        async def one(name: str) -> None:
            url = f"{cfg.host}/apis/apps/v1/namespaces/default/deployments/{name}"
            query = {"fieldManager": "bench", "force": "true"}
            body = json.dumps(deployment(name))
            async with gate, session.patch(url, params=query, data=body, headers=headers) as r:
                await r.read()
                if r.status >= 300:
                    raise RuntimeError(f"PATCH {name}: HTTP {r.status}")

        t, cpu = time.monotonic(), time.process_time()
        await asyncio.gather(*(one(n) for n in names))
        return len(names) / (time.monotonic() - t), (time.process_time() - cpu) / len(names)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d, start(Path(d)) as cp:
        # The client read $KUBECONFIG's default when it was imported, before there was one.
        kube_config.KUBE_CONFIG_DEFAULT_LOCATION = str(cp.kubeconfig)
        kube = Kube.from_environment(field_manager="bench")
        print(f"objects={args.objects} cores={os.cpu_count()} load {os.getloadavg()[0]:.1f}")
        try:
            for round_ in range(2):
                seam = [f"s{round_}-{i}" for i in range(args.objects)]
                aio = [f"a{round_}-{i}" for i in range(args.objects)]
                for what, names, run in (
                    ("seam create", seam, through_seam),
                    ("aiohttp create", aio, through_aiohttp),
                    ("seam update", aio, through_seam),
                    ("aiohttp update", seam, through_aiohttp),
                ):
                    rate, cpu = asyncio.run(run(kube, names))
                    print(f"  {what:16} {rate:6.0f} requests/s  {cpu * 1e3:5.2f} ms CPU/request")
        finally:
            kube.close()
        print(f"load {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
