"""How the operator scales: 200 Agents over 20 InstallationModels, against a real API server.

Starts the cluster tier's control plane (``scripts/controlplane.sh build`` first), the CRDs, a
stand-in model server on loopback answering ``/api/show`` (503 until released) and the operator
as a process. Measures:

- time from applying everything until every Agent is reconciled (``phase: Held``);
- after every model starts answering: per Agent, the delay from its InstallationModel turning
  ``Served`` to its Deployment getting replicas (both observed by this process's watches, so the
  watch latency is on both sides), p50 and p99 (goal: p99 < 500 ms at 1,000 Agents);
- API requests per Agent, on the first reconcile and per release, by kind from the operator's
  client log (Events apart, the models' probes left out) and in all through its seam
  (``ankka.operator.kube``); kopf's own requests are in neither;
- the operator's resident memory (peak and at the end, from ``/proc``).

Run: ``PYTHONPATH=. python bench/operator_scale.py [--agents 200 --models 20]``. No peer
publishes such figures, so it prints ours only.

``--pods`` runs on the pods tier's real node instead (root; ``make images`` first): the chart's
operator and gateway as pods, a llama.cpp model pod, and Agents whose runtime pods run the
tier's tool-less agent. It measures the time from one ``kubectl apply`` of ``--agents`` Agents
(default 50 there) to each one's runtime pod Ready (p50, p99), and from a fresh
InstallationModel turning ``Served`` to the first answer from an Agent pod waiting on it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.cluster.controlplane import ControlPlane, start  # noqa: E402

NS = "bench"


class StandIn(ThreadingHTTPServer):
    serving = False


class Handler(BaseHTTPRequestHandler):
    server: StandIn

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.server.serving:
            self.send_error(503)
            return
        body = json.dumps({"capabilities": ["completion"]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def kubectl(cp: ControlPlane, *args: str, stdin: str | None = None) -> str:
    return cp.kubectl(*args, stdin=stdin).stdout


def watch(
    cp: ControlPlane, kind: str, seen: dict[str, float], test: Any, stop: threading.Event
) -> None:
    """Record when each object of ``kind`` first passes ``test`` (kubectl --watch, JSON lines)."""
    proc = subprocess.Popen(
        [
            str(cp.bin / "kubectl"),
            "get",
            kind,
            "-n",
            NS,
            "--watch",
            "-o",
            "json",
            "--output-watch-events",
        ],
        env=cp.env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    decoder = json.JSONDecoder()
    buffer = ""
    assert proc.stdout is not None
    while not stop.is_set():
        line = proc.stdout.readline()
        if not line:
            break
        buffer += line
        try:
            event, _ = decoder.raw_decode(buffer)
        except ValueError:
            continue
        buffer = ""
        obj = event.get("object", {})
        name = obj.get("metadata", {}).get("name")
        if name and name not in seen and test(obj):
            seen[name] = time.monotonic()
    proc.terminate()


def served(obj: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Served" and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def released(obj: dict[str, Any]) -> bool:
    return bool((obj.get("spec") or {}).get("replicas"))


def operator_requests(log: Path) -> int:
    found = re.findall(r"api requests so far: (\d+)", log.read_text(errors="replace"))
    return int(found[-1]) if found else -1


def settled_kinds(log: Path, *, quiet: float = 3.0, limit: float = 120.0) -> dict[str, int]:
    """The client's requests by kind once those about Agents (all but the models' periodic
    list and probes) have not moved for ``quiet`` seconds: the work a phase started, Events
    and models-file renders included, has drained (or ``limit`` passed)."""
    end = time.monotonic() + limit
    kinds = request_kinds(log.read_text(errors="replace"))
    last, since = agent_work(kinds), time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.5)
        kinds = request_kinds(log.read_text(errors="replace"))
        if agent_work(kinds) != last:
            last, since = agent_work(kinds), time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return kinds


def agent_work(kinds: dict[str, int], *, events: bool = True) -> int:
    return sum(
        n
        for kind, n in kinds.items()
        if "installationmodels" not in kind and (events or "events" not in kind)
    )


_REQUEST = re.compile(r'"(GET|POST|PATCH|PUT|DELETE) (/apis?/[^ ?"]+)')


def request_kinds(text: str) -> dict[str, int]:
    """The client's request lines (urllib3's debug log) by method and resource kind."""
    counts: dict[str, int] = {}
    for method, path in _REQUEST.findall(text):
        parts = path.split("/")
        if "namespaces" in parts:
            i = parts.index("namespaces")
            parts = parts[:i] + parts[i + 2 :]
        rest = parts[3:] if parts[1] == "api" else parts[4:]
        kind = rest[0] + ("/status" if rest[-1] == "status" else "")
        if method == "GET" and len(rest) == 1:
            kind += " (list)"
        counts[f"{method} {kind}"] = counts.get(f"{method} {kind}", 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time so far, from ``/proc/PID/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_mib(pid: int) -> tuple[float, float]:
    """A process's peak and current resident set (MiB), from ``/proc/PID/status``."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return (int(fields["VmHWM"].split()[0]) / 1024, int(fields["VmRSS"].split()[0]) / 1024)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def pods_mode(agents: int) -> int:
    """Agents on the real node: apply → runtime pods Ready, and Served → first answer."""
    import httpx

    from tests.cluster.agent_tls import platform_client
    from tests.pods import conftest as pods
    from tests.pods.manifests import MODEL, QUESTION, agent, installation_model

    ns = "bench"
    with tempfile.TemporaryDirectory() as tmp, pods.running(Path(tmp)) as cluster:
        installed = pods.install_chart(cluster)
        if installed.returncode != 0:
            raise RuntimeError(f"helm install failed: {installed.stderr}")
        for name in ("ankka-operator", "ankka-gateway"):
            cluster.wait_ready(name, pods.PLATFORM_NS, f"app.kubernetes.io/name={name}")
        cluster.kubectl.run("create", "namespace", ns)
        # Served → first answer: the model and one Agent waiting on it, applied together.
        cluster.apply(installation_model(ns))
        cluster.apply(agent("first", "chat_agent", ns))
        t_served = poll_until(
            lambda: served(cluster.kubectl.get("installationmodel", MODEL, ns) or {}),
            timeout=300,
        )

        # Runtimes serve mTLS only: ask as a platform identity from the CA's Secret.
        caller = platform_client(cluster.kubectl, Path(tmp) / "tls", check_hostname=True)

        def first_answer() -> bool:
            svc = cluster.kubectl.get("service", "first", ns)
            if svc is None:
                return False
            url = f"https://{svc['spec']['clusterIP']}:443/v1/agents/chat/sessions/bench"
            sni = {"sni_hostname": f"first.{ns}.svc"}
            try:
                answer = caller.post(url, json=QUESTION, timeout=120, extensions=sni)
            except httpx.TransportError:
                return False
            return answer.status_code == 200

        t_answer = poll_until(first_answer, timeout=300)
        caller.close()
        # Apply → Ready: every Agent at once, on the served model.
        t0 = time.monotonic()
        docs = [agent(f"a{j}", "chat_agent", ns) for j in range(agents)]
        cluster.kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
        ready_at: dict[str, float] = {}
        deadline = t0 + 900
        while len(ready_at) < agents and time.monotonic() < deadline:
            for pod in cluster.ready_pods(ns, "app.kubernetes.io/name=agent"):
                owner = pod["metadata"]["labels"]["app.kubernetes.io/instance"]
                if owner != "first":
                    ready_at.setdefault(owner, time.monotonic() - t0)
            time.sleep(1)
    if len(ready_at) < agents:
        print(f"only {len(ready_at)} of {agents} runtime pods were Ready", file=sys.stderr)
        return 1
    delays = list(ready_at.values())
    print(f"pods mode: agents={agents} cores={os.cpu_count()} load={os.getloadavg()[0]:.1f}")
    print(
        f"apply -> runtime pod Ready: p50 {statistics.median(delays):.1f} s, "
        f"p99 {percentile(delays, 0.99):.1f} s, max {max(delays):.1f} s"
    )
    print(
        f"InstallationModel Served -> first answer from an Agent pod: {t_answer - t_served:.1f} s"
    )
    return 0


def poll_until(check: Any, *, timeout: float) -> float:
    """The monotonic time at which ``check()`` first held (polled every 0.5 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(0.5)
    raise RuntimeError(f"not within {timeout:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=None, help="200 (50 with --pods)")
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--pods", action="store_true", help="on the pods tier's real node")
    parser.add_argument(
        "--deadline", type=float, default=600, help="seconds to wait for every Agent to be Held"
    )
    parser.add_argument("--keep-log", type=Path, help="copy the operator's log here at the end")
    args = parser.parse_args()
    if args.pods:
        return pods_mode(args.agents or 50)
    args.agents = args.agents or 200
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp, start(Path(tmp)) as cp:
        kubectl(cp, "apply", "-f", str(ROOT / "crds"))
        kubectl(cp, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        kubectl(cp, "create", "namespace", "ankka-system")
        kubectl(cp, "create", "namespace", NS)
        stand_in = StandIn(("127.0.0.1", 0), Handler)
        threading.Thread(target=stand_in.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{stand_in.server_address[1]}"
        env = {
            **cp.env(),
            "PYTHONPATH": str(ROOT),
            "ANKKA_NAMESPACE": "ankka-system",
            "ANKKA_OPERATOR_PROBE_TICK_SECONDS": "0.5",
            "ANKKA_OPERATOR_AGENT_RESYNC_SECONDS": "3600",
        }
        log = Path(tmp) / "operator.log"
        with log.open("wb") as out:
            op = subprocess.Popen(
                [sys.executable, "-m", "ankka.operator", "--verbose"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + 60
            while "ankka operator started" not in log.read_text(errors="replace"):
                if time.monotonic() > deadline or op.poll() is not None:
                    raise RuntimeError("the operator did not start:\n" + log.read_text()[-3000:])
                time.sleep(0.2)
            models = [
                {
                    "apiVersion": "ankka.dev/v1alpha1",
                    "kind": "InstallationModel",
                    "metadata": {"name": f"m{i}", "namespace": NS},
                    "spec": {"model": f"m{i}", "endpoint": {"url": url}},
                }
                for i in range(args.models)
            ]
            agents = [
                {
                    "apiVersion": "ankka.dev/v1alpha1",
                    "kind": "Agent",
                    "metadata": {"name": f"a{j}", "namespace": NS},
                    "spec": {
                        "image": "i",
                        "module": "m",
                        "models": [{"name": "local", "installation": f"m{j % args.models}"}],
                    },
                }
                for j in range(args.agents)
            ]
            before = operator_requests(log)
            cpu_start = cpu_seconds(op.pid)
            start_kinds = request_kinds(log.read_text(errors="replace"))
            t0 = time.monotonic()
            kubectl(cp, "apply", "-f", "-", stdin=yaml.safe_dump_all(models + agents))
            while True:
                items = json.loads(kubectl(cp, "get", "agents", "-n", NS, "-o", "json"))["items"]
                if (
                    sum(1 for a in items if (a.get("status") or {}).get("phase") == "Held")
                    == args.agents
                ):
                    break
                if time.monotonic() - t0 > args.deadline:
                    held = sum(1 for a in items if (a.get("status") or {}).get("phase") == "Held")
                    peak_mib, rss_mib = memory_mib(op.pid)
                    print(
                        f"agents={args.agents} models={args.models} load average {load:.1f} at "
                        f"the start, {os.getloadavg()[0]:.1f} now: only {held} Agents Held after "
                        f"{args.deadline:g} s; {operator_requests(log) - before} API requests "
                        f"so far; operator resident memory peak {peak_mib:.0f} MiB, "
                        f"now {rss_mib:.0f} MiB"
                    )
                    return 1
                time.sleep(0.5)
            reconcile_all = time.monotonic() - t0
            cpu_held = cpu_seconds(op.pid)
            first_kinds = settled_kinds(log)
            per_reconcile = (operator_requests(log) - before) / args.agents

            model_seen: dict[str, float] = {}
            deploy_seen: dict[str, float] = {}
            stop = threading.Event()
            threads = [
                threading.Thread(
                    target=watch,
                    args=(cp, "installationmodels", model_seen, served, stop),
                    daemon=True,
                ),
                threading.Thread(
                    target=watch, args=(cp, "deployments", deploy_seen, released, stop), daemon=True
                ),
            ]
            for t in threads:
                t.start()
            time.sleep(2)
            before_release = operator_requests(log)
            cpu_before_release = cpu_seconds(op.pid)
            stand_in.serving = True
            released_at = time.monotonic()
            deadline = time.monotonic() + 300
            while len(deploy_seen) < args.agents and time.monotonic() < deadline:
                time.sleep(0.2)
            release_all = time.monotonic() - released_at
            cpu_released = cpu_seconds(op.pid)
            all_kinds = settled_kinds(log)
            per_release = (operator_requests(log) - before_release) / args.agents
            peak_mib, rss_mib = memory_mib(op.pid)
            stop.set()
            delays = sorted(
                deploy_seen[f"a{j}"] - model_seen[f"m{j % args.models}"]
                for j in range(args.agents)
                if f"a{j}" in deploy_seen and f"m{j % args.models}" in model_seen
            )
        finally:
            op.terminate()
            op.wait(timeout=20)
            stand_in.shutdown()
            if args.keep_log is not None:
                args.keep_log.write_bytes(log.read_bytes())
    if len(delays) < args.agents:
        print(f"only {len(delays)} of {args.agents} Agents were released", file=sys.stderr)
        return 1
    p99 = percentile(delays, 0.99)
    print(
        f"agents={args.agents} models={args.models} cores={os.cpu_count()} "
        f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    )
    print(f"reconcile all (apply -> every Agent Held): {reconcile_all:.2f} s")
    print(
        f"Served -> released delay: p50 {statistics.median(delays) * 1000:.0f} ms, "
        f"p99 {p99 * 1000:.0f} ms, max {delays[-1] * 1000:.0f} ms"
    )
    print(f"every Agent released {release_all:.2f} s after the models started answering")
    first = {k: n - start_kinds.get(k, 0) for k, n in first_kinds.items()}
    release = {k: n - first_kinds.get(k, 0) for k, n in all_kinds.items()}
    for phase, kinds in (("first reconcile", first), ("release", release)):
        objects = agent_work(kinds, events=False) / args.agents
        events = (agent_work(kinds) - agent_work(kinds, events=False)) / args.agents
        print(
            f"API requests per Agent, {phase}: {objects:.2f} for its objects and status, "
            f"{events:.2f} Events (the client's log; the models' probes apart)"
        )
    print(
        f"API requests per Agent through the operator's seam, probes included: first "
        f"reconcile {per_reconcile:.1f}, release {per_release:.1f}"
    )
    print(
        f"operator CPU: {cpu_held - cpu_start:.1f} s until every Agent was Held "
        f"({(cpu_held - cpu_start) / reconcile_all:.2f} cores), "
        f"{cpu_released - cpu_before_release:.1f} s until every Agent was released "
        f"({(cpu_released - cpu_before_release) / release_all:.2f} cores)"
    )
    print(f"operator resident memory: peak {peak_mib:.0f} MiB, at the end {rss_mib:.0f} MiB")
    print("requests by kind, until every Agent is Held / in the release (from the client's log):")
    for kind in all_kinds:
        print(f"  {kind:48} {first.get(kind, 0):6d} {release.get(kind, 0):6d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
