"""The operator reaching a runtime over real mTLS (issues 9 and 13): it presents
``ankka://platform/operator``, issued from the platform CA; it accepts the runtime by the CA
and the URI SAN of the Agent (an address of ``127.0.0.1`` is fine, no host name is checked);
every other runtime is refused with a reason that says what to do. kubelet's probe port
answers without a certificate, and only /healthz and /readyz.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest

from ankka._kernel.clock import SystemClock
from ankka.operator import certs
from ankka.operator.identity import OperatorIdentity
from ankka.operator.runtime_client import RuntimeClients, unreachable
from tests.support.certs import Issued, write_tls_dir
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

NOW = dt.datetime.now(dt.UTC)
CA = certs.new_ca(now=NOW)
RESEARCH = certs.agent_uri("lab", "research")


def agent_tls_dir(directory: Path, ca: certs.KeyPair, namespace: str, agent: str) -> Path:
    """What the operator puts in an Agent's Secret, written as Kubernetes mounts it."""
    pair = certs.issue(
        ca,
        uri=certs.agent_uri(namespace, agent),
        now=NOW,
        server=True,
        client=True,
        dns_names=certs.agent_dns_names(namespace, agent),
    )
    leaf = Issued(cert_pem=pair.cert_pem.encode(), key_pem=pair.key_pem.encode(), serial=0)
    return write_tls_dir(directory, leaf=leaf, ca_pem=ca.cert_pem.encode())


def serve(tmp_path: Path, *args: str) -> Server:
    store = f"sqlite:///{tmp_path / 'tasks.sqlite3'}"
    env = {
        "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
        "ANKKA_MODEL_DEFAULT_URL": "http://127.0.0.1:9/v1",  # nothing: no task runs here
        "ANKKA_MODEL_DEFAULT_MODEL": "standin",
    }
    command = ankka_command("serve", "examples.tasks:service", "--port", "0", "--store", store)
    return start([*command, *args], env=env)


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Server]:
    tls = agent_tls_dir(tmp_path / "tls", CA, "lab", "research")
    server = serve(tmp_path, "--tls-dir", str(tls), "--probe-port", "0")
    yield server
    server.stop()


def identity(ca: certs.KeyPair = CA) -> OperatorIdentity:
    return OperatorIdentity(ca, lifetime=dt.timedelta(hours=1), clock=SystemClock())


async def reach(
    url: str, expected: str, who: OperatorIdentity | None = None
) -> httpx2.Response | tuple[str, str]:
    """GET /v1/agents as the operator does; the failure as the Task's condition says it."""
    async with RuntimeClients(who or identity(), timeout=10) as clients:
        client = await clients.get(url, expected)
        try:
            return await client.get(f"{url}/v1/agents")
        except httpx2.HTTPError as exc:
            return unreachable(exc, address=url, namespace="lab", agent="research")


async def test_the_operator_hands_a_task_to_the_agent_s_runtime_as_the_platform(
    runtime: Server,
) -> None:
    assert runtime.url.startswith("https://127.0.0.1:")
    async with RuntimeClients(identity(), timeout=10) as clients:
        client = await clients.get(runtime.url, RESEARCH)
        answer = await client.put(
            f"{runtime.url}/v1/agents/researcher/tasks/t-1",
            json={"type": "summary", "instructions": "Summarise ankka."},
        )
    assert answer.status_code == 201, answer.text
    assert answer.json()["created_by"] == "ankka://platform/operator"


async def test_a_runtime_serving_another_agent_s_certificate_is_refused(runtime: Server) -> None:
    why, message = await reach(runtime.url, certs.agent_uri("lab", "impostor"))  # type: ignore[misc]
    assert why == "WrongRuntimeIdentity"
    assert "names ankka://service/lab/research, not ankka://service/lab/impostor" in message
    assert "lab/research-tls" in message  # what to serve instead (the Agent named in the call)


async def test_a_runtime_whose_certificate_another_ca_issued_is_refused(runtime: Server) -> None:
    other = certs.new_ca(now=NOW, common_name="someone else")
    why, message = await reach(runtime.url, RESEARCH, identity(other))  # type: ignore[misc]
    assert why == "UnknownRuntimeCA"
    assert "not one the platform CA issued" in message and "--tls-dir" in message


async def test_an_https_address_to_a_plain_runtime_says_tls_failed(tmp_path: Path) -> None:
    plain = serve(tmp_path)
    try:
        address = plain.url.replace("http://", "https://")
        why, message = await reach(address, RESEARCH)  # type: ignore[misc]
    finally:
        plain.stop()
    assert why == "TLSRefused"
    assert "must serve --tls-dir" in message and "written http://" in message


async def test_a_plain_http_address_is_a_loopback_dev_loop_trusted_as_local(
    tmp_path: Path,
) -> None:
    plain = serve(tmp_path)
    try:
        async with RuntimeClients(identity(), timeout=10) as clients:
            client = await clients.get(plain.url, RESEARCH)
            answer = await client.put(
                f"{plain.url}/v1/agents/researcher/tasks/t-2",
                json={"type": "summary", "instructions": "Summarise ankka."},
            )
    finally:
        plain.stop()
    assert answer.status_code == 201 and answer.json()["created_by"] == "local"


def probe_url(server: Server) -> str:
    line = next(line for line in server.output if "probes on http://" in line)
    return line.split("probes on ", 1)[1].split()[0]


def test_the_probe_port_answers_kubelet_without_a_certificate_and_nothing_else(
    runtime: Server,
) -> None:
    probes = probe_url(runtime)
    assert httpx.get(f"{probes}/readyz", timeout=10).json() == {"ok": True}
    assert httpx.get(f"{probes}/healthz", timeout=10).status_code == 200
    for path in ("/v1/agents", "/metrics", "/v1/tasks/t-1"):
        assert httpx.get(f"{probes}{path}", timeout=10).status_code == 404, path
    assert httpx.post(f"{probes}/readyz", timeout=10).status_code == 405
    # The API port itself admits no caller without a platform certificate (refused at the
    # handshake, or answered 401 where a bearer token could have named the caller).
    try:
        status: int | None = httpx.get(
            f"{runtime.url}/v1/agents", verify=False, timeout=10
        ).status_code
    except httpx.HTTPError:
        status = None
    assert status in (None, 401)
