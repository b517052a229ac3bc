"""MCP OAuth credentials in a Kubernetes Secret, against the real kube-apiserver.

The runtime keeps them over the API server with its pod's service account (``secret:NAME``,
ankka/runtime/features/mcp/credentials.py). Here a ServiceAccount allowed ``get``, ``update``
(on that one Secret) and ``create`` (on Secrets) writes tokens, a second store reads them back,
two writers that raced both land, and an account without the rights gets a clear refusal that
carries no token.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import yaml
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from ankka.runtime.features.mcp.credentials import (
    CredentialsUnavailable,
    IssuerStorage,
    SecretStore,
)
from tests.cluster.conftest import Kubectl
from tests.cluster.controlplane import ControlPlane

NS = "mcp-credentials"
SECRET = "mcp-credentials"
ISSUER = "https://auth.example/"


def _account(kubectl: Kubectl, cp: ControlPlane, name: str, where: Path) -> Path:
    kubectl.run("create", "serviceaccount", name, "-n", NS, check=False)
    where.mkdir(parents=True, exist_ok=True)
    (where / "token").write_text(kubectl.run("create", "token", name, "-n", NS).stdout.strip())
    (where / "namespace").write_text(NS)
    (where / "ca.crt").write_bytes((cp.workdir / "pki" / "ca.crt").read_bytes())
    return where


def _allow(kubectl: Kubectl, account: str) -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "mcp-credentials", "namespace": NS},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "resourceNames": [SECRET],
                "verbs": ["get", "update"],
            },
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "mcp-credentials", "namespace": NS},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "mcp-credentials",
        },
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NS}],
    }
    for thing in (role, binding):
        kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(thing))


def _storage(store: SecretStore, resource: str) -> IssuerStorage:
    return IssuerStorage(store, resource, lambda: ISSUER, lock=asyncio.Lock())


def test_credentials_live_in_a_secret_and_racing_writers_both_land(
    kubectl: Kubectl, controlplane: ControlPlane, tmp_path: Path
) -> None:
    kubectl.run("create", "namespace", NS, check=False)
    account = _account(kubectl, controlplane, "agent", tmp_path / "agent")
    _allow(kubectl, "agent")

    def store() -> SecretStore:
        return SecretStore(SECRET, api=controlplane.server, account_dir=account)

    async def write() -> None:
        first = _storage(store(), "https://one.example/mcp")
        await first.set_client_info(OAuthClientInformationFull(client_id="c-1", redirect_uris=None))
        await first.set_tokens(
            OAuthToken(access_token="at-one", refresh_token="rt-one", expires_in=600)
        )
        # Two runtimes' writes at once: each reads, changes its resource, replaces the Secret.
        await asyncio.gather(
            _storage(store(), "https://two.example/mcp").set_tokens(
                OAuthToken(access_token="at-two", expires_in=600)
            ),
            _storage(store(), "https://three.example/mcp").set_tokens(
                OAuthToken(access_token="at-three", expires_in=600)
            ),
        )

    asyncio.run(write())

    async def read() -> list[str | None]:
        found = []
        for resource in ("one", "two", "three"):
            tokens = await _storage(store(), f"https://{resource}.example/mcp").get_tokens()
            found.append(tokens.access_token if tokens else None)
        return found

    assert asyncio.run(read()) == ["at-one", "at-two", "at-three"]
    secret = json.loads(kubectl.run("get", "secret", SECRET, "-n", NS, "-o", "json").stdout)
    assert list(secret["data"]) == ["credentials.json"]


def test_an_account_without_the_rights_is_refused_naming_the_secret(
    kubectl: Kubectl, controlplane: ControlPlane, tmp_path: Path
) -> None:
    kubectl.run("create", "namespace", NS, check=False)
    account = _account(kubectl, controlplane, "stranger", tmp_path / "stranger")
    store = SecretStore(SECRET, api=controlplane.server, account_dir=account)
    try:
        asyncio.run(store.read())
    except CredentialsUnavailable as exc:
        message = str(exc)
    else:
        raise AssertionError("an account without rights read the Secret")
    assert f"the Secret {SECRET!r}" in message and "403" in message
    assert (account / "token").read_text() not in message
