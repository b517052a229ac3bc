"""The API server's write rate, the floor under the operator's release latency.

Starts the cluster tier's control plane (``scripts/controlplane.sh build`` first) and
server-side-applies ``--objects`` Deployments (0 replicas) twice, create then update, through
two clients in turn, two rounds: the operator's seam (``ankka.operator.kube.Kube``: the
official synchronous client in 32 threads) and an asyncio client (aiohttp, 64 requests in
flight over at most 32 connections). Prints requests per second and this process's CPU per
request for each. If the asyncio client is not faster here, a faster client cannot shorten the
operator's release, only its CPU.

``--kinds`` compares instead what a release can write, through the seam: ``--objects``
Deployments as the operator renders an Agent's (held, 0 replicas) are released and held again,
two rounds, by a server-side apply of the whole Deployment (what a reconcile applies), a merge
patch of ``spec.replicas`` (and the held annotation) alone, and the ``scale`` subresource.
Besides requests per second it prints the CPU per request of kube-apiserver and etcd (from
``/proc``), which is what the two cores spend for the API server's side of each write.

Run: ``PYTHONPATH=. python bench/kube_write_rate.py [--objects 600] [--kinds]`` (aiohttp: extra
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

from ankka.api.resources import AgentSpec  # noqa: E402
from ankka.operator.agents import agent_children  # noqa: E402
from ankka.operator.kube import Kube  # noqa: E402
from ankka.operator.settings import Settings  # noqa: E402
from tests.cluster.controlplane import ControlPlane, start  # noqa: E402


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


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time so far, from ``/proc/PID/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def agent_deployment(name: str, *, held: bool) -> dict[str, Any]:
    """The Deployment the operator renders for an Agent (its other children left out)."""
    spec = AgentSpec.model_validate(
        {"image": "i", "module": "m", "models": [{"name": "local", "installation": "m0"}]}
    )
    children = agent_children(
        namespace="default", name=name, uid="-", spec=spec, settings=Settings(), held=held
    )
    deployment = next(c for c in children if c["kind"] == "Deployment")
    # No Agent owns it here: without the owner reference the garbage collector leaves it be.
    del deployment["metadata"]["ownerReferences"]
    return deployment


async def release_writes(kube: Kube, kind: str, names: list[str], *, held: bool) -> None:
    """Write every Deployment's replicas (0 when ``held``) the way ``kind`` says."""

    async def one(name: str) -> None:
        found = True
        if kind == "apply whole":
            await kube.apply(agent_deployment(name, held=held))
        elif kind == "merge replicas":
            found = await kube.patch(
                "apps/v1",
                "Deployment",
                "default",
                name,
                {
                    "metadata": {"annotations": {"ankka.dev/held": "true" if held else "false"}},
                    "spec": {"replicas": 0 if held else 1},
                },
            )
        else:
            found = await kube.patch(
                "apps/v1",
                "Deployment",
                "default",
                name,
                {"spec": {"replicas": 0 if held else 1}},
                subresource="scale",
            )
        if kind != "apply whole" and not found:
            raise RuntimeError(f"Deployment {name} is gone")

    await asyncio.gather(*(one(n) for n in names))


def write_kinds(cp: ControlPlane, kube: Kube, objects: int) -> None:
    pids = dict(cp.pids)
    names = [f"d{i}" for i in range(objects)]
    asyncio.run(release_writes(kube, "apply whole", names, held=True))  # created, held
    print(
        f"  {'write':22} {'rate':>8} {'client':>8} {'apiserver':>8} {'etcd':>8}"
        "  (ms CPU per request)"
    )
    for round_ in range(2):
        for kind in ("apply whole", "merge replicas", "scale"):
            for held in (False, True):  # release, then hold again: every write changes it
                api, etcd = cpu_seconds(pids["kube-apiserver"]), cpu_seconds(pids["etcd"])
                t, cpu = time.monotonic(), time.process_time()
                asyncio.run(release_writes(kube, kind, names, held=held))
                rate = objects / (time.monotonic() - t)
                per = [
                    (time.process_time() - cpu) / objects,
                    (cpu_seconds(pids["kube-apiserver"]) - api) / objects,
                    (cpu_seconds(pids["etcd"]) - etcd) / objects,
                ]
                what = f"{kind} {'hold' if held else 'release'}"
                print(
                    f"  {what:22} {rate:6.0f}/s "
                    + " ".join(f"{x * 1e3:8.2f}" for x in per)
                    + f"   round {round_ + 1}"
                )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=600)
    parser.add_argument("--kinds", action="store_true", help="compare a release's write kinds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d, start(Path(d)) as cp:
        # The client read $KUBECONFIG's default when it was imported, before there was one.
        kube_config.KUBE_CONFIG_DEFAULT_LOCATION = str(cp.kubeconfig)
        kube = Kube.from_environment(field_manager="bench")
        print(f"objects={args.objects} cores={os.cpu_count()} load {os.getloadavg()[0]:.1f}")
        try:
            if args.kinds:
                write_kinds(cp, kube, args.objects)
            for round_ in range(0 if args.kinds else 2):
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
