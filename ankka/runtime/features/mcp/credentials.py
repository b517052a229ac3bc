"""Where OAuth credentials for MCP servers are kept: per issuer, in a file or a Kubernetes Secret.

``ANKKA_MCP_CREDENTIALS`` names the place:

- ``file:PATH``: one JSON file, written whole (a temporary file renamed over it, mode 0600);
- ``secret:NAME``: the Kubernetes Secret NAME in the runtime's own namespace (key
  ``credentials.json``), read and replaced over the API server with the pod's service account
  (``get`` and ``update`` on that Secret; ``create`` the first time), like TokenReview, with no
  Kubernetes client;
- unset: memory only: a restart forgets every token, so a person has to consent again.

The document holds, per authorization server (its issuer), the client's registration (its id
and any secret the server issued) and the tokens it gave for each resource (an MCP server's
canonical URL), and which issuer each resource used last. Tokens are bound to the issuer that
issued them: the SDK drops a stored registration whose issuer is not the one the server now
names (SEP-2352). Nothing here logs a value; a failure names the place, never the content.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import httpx2
from mcp.client.auth import TokenStorage
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from ankka._kernel.errors import ConfigurationError, StoreError

__all__ = [
    "CredentialStore",
    "CredentialsUnavailable",
    "FileStore",
    "IssuerStorage",
    "MemoryStore",
    "SecretStore",
    "StoreConflict",
    "store_from",
]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
SECRET_KEY = "credentials.json"
MAX_DOCUMENT = 1 << 20


class CredentialsUnavailable(StoreError):
    """The credential store could not be read or written."""

    kind = "mcp_credentials_unavailable"


class StoreConflict(CredentialsUnavailable):
    """Someone else wrote the store since it was read; read it again and redo the change."""


class CredentialStore(Protocol):
    async def read(self) -> dict[str, Any]: ...

    async def write(self, document: dict[str, Any]) -> None: ...


class MemoryStore:
    def __init__(self) -> None:
        self._document: dict[str, Any] = {}

    async def read(self) -> dict[str, Any]:
        copy: dict[str, Any] = json.loads(json.dumps(self._document))
        return copy

    async def write(self, document: dict[str, Any]) -> None:
        self._document = json.loads(json.dumps(document))


class FileStore:
    def __init__(self, path: Path) -> None:
        self.path = path

    async def read(self) -> dict[str, Any]:
        return await asyncio.to_thread(self._read)

    def _read(self) -> dict[str, Any]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise CredentialsUnavailable(
                f"cannot read the MCP credentials file {self.path}: {exc.strerror}"
            ) from None
        return _decode(raw, f"the MCP credentials file {self.path}")

    async def write(self, document: dict[str, Any]) -> None:
        await asyncio.to_thread(self._write, document)

    def _write(self, document: dict[str, Any]) -> None:
        data = json.dumps(document, sort_keys=True).encode()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".credentials-")
            try:
                os.fchmod(fd, 0o600)
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temporary, self.path)
        except OSError as exc:
            raise CredentialsUnavailable(
                f"cannot write the MCP credentials file {self.path}: {exc.strerror}"
            ) from None


class SecretStore:
    """One Secret over the API server, replaced with its resourceVersion (a concurrent writer
    makes the replace fail with 409, and the write is tried again on what is there now)."""

    def __init__(
        self,
        name: str,
        *,
        api: str = "https://kubernetes.default.svc",
        account_dir: Path = SERVICE_ACCOUNT_DIR,
        namespace: str | None = None,
    ) -> None:
        self.name = name
        self._api = api.rstrip("/")
        self._dir = account_dir
        self._namespace = namespace
        self._version: str | None = None

    def _where(self) -> str:
        return f"the Secret {self.name!r} (MCP credentials)"

    def _client(self) -> tuple[httpx2.AsyncClient, str]:
        try:
            token = (self._dir / "token").read_text().strip()
            namespace = self._namespace or (self._dir / "namespace").read_text().strip()
            context = ssl.create_default_context(cafile=str(self._dir / "ca.crt"))
        except (OSError, ssl.SSLError) as exc:
            raise CredentialsUnavailable(
                f"{self._where()}: the service account's token, namespace or CA cannot be read "
                f"from {self._dir}: {exc}"
            ) from None
        client = httpx2.AsyncClient(
            base_url=self._api,
            headers={"Authorization": f"Bearer {token}"},
            verify=context,
            timeout=10.0,
        )
        return client, f"/api/v1/namespaces/{namespace}/secrets/{self.name}"

    async def read(self) -> dict[str, Any]:
        client, path = self._client()
        async with client:
            try:
                response = await client.get(path)
            except httpx2.HTTPError as exc:
                raise CredentialsUnavailable(f"{self._where()}: {type(exc).__name__}") from None
        if response.status_code == 404:
            self._version = None
            return {}
        if response.status_code != 200:
            raise CredentialsUnavailable(
                f"{self._where()}: the API server answered {response.status_code}"
            )
        body = response.json()
        self._version = body.get("metadata", {}).get("resourceVersion")
        encoded = (body.get("data") or {}).get(SECRET_KEY)
        if not encoded:
            return {}
        return _decode(base64.b64decode(encoded), self._where())

    async def write(self, document: dict[str, Any]) -> None:
        client, path = self._client()
        data = base64.b64encode(json.dumps(document, sort_keys=True).encode()).decode()
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": self.name, "labels": {"app.kubernetes.io/part-of": "ankka"}},
            "type": "Opaque",
            "data": {SECRET_KEY: data},
        }
        async with client:
            try:
                if self._version is None:
                    response = await client.post(path.rsplit("/", 1)[0], json=body)
                else:
                    body["metadata"]["resourceVersion"] = self._version
                    response = await client.put(path, json=body)
            except httpx2.HTTPError as exc:
                raise CredentialsUnavailable(f"{self._where()}: {type(exc).__name__}") from None
        if response.status_code == 409:
            raise StoreConflict(f"{self._where()} was written meanwhile by someone else")
        if response.status_code not in (200, 201):
            raise CredentialsUnavailable(
                f"{self._where()}: the API server answered {response.status_code} to the write"
            )
        self._version = response.json().get("metadata", {}).get("resourceVersion")


def _decode(raw: bytes, where: str) -> dict[str, Any]:
    if len(raw) > MAX_DOCUMENT:
        raise CredentialsUnavailable(f"{where} is larger than {MAX_DOCUMENT} bytes")
    try:
        document = json.loads(raw)
    except ValueError:
        raise CredentialsUnavailable(f"{where} is not JSON; move it away to start afresh") from None
    if not isinstance(document, dict):
        raise CredentialsUnavailable(f"{where} is not a JSON object")
    return document


def store_from(value: str | None) -> CredentialStore:
    """The store ``ANKKA_MCP_CREDENTIALS`` names."""
    if not value:
        return MemoryStore()
    kind, _, where = value.partition(":")
    if kind == "file" and where:
        return FileStore(Path(where).expanduser())
    if kind == "secret" and where:
        return SecretStore(where)
    raise ConfigurationError(
        f"ANKKA_MCP_CREDENTIALS={value[:80]!r} is neither file:PATH nor secret:NAME"
    )


class IssuerStorage(TokenStorage):
    """The SDK's token storage for one MCP server (``resource``) over a shared store.

    ``issuer`` gives the authorization server the provider is talking to now (None before
    discovery). A token is stored with the time it expires, so that after a restart the SDK
    knows to refresh it instead of sending an expired one."""

    def __init__(
        self,
        store: CredentialStore,
        resource: str,
        issuer: Callable[[], str | None],
        *,
        lock: asyncio.Lock,
        on_tokens: Callable[[OAuthToken], None] | None = None,
    ) -> None:
        self._store = store
        self._resource = resource
        self._issuer = issuer
        self._lock = lock
        self._on_tokens = on_tokens

    async def _entry(self) -> dict[str, Any]:
        document = await self._store.read()
        issuer = document.get("resources", {}).get(self._resource)
        if issuer is None:
            return {}
        entry: dict[str, Any] = document.get("issuers", {}).get(issuer, {})
        return entry

    async def get_tokens(self) -> OAuthToken | None:
        raw = (await self._entry()).get("tokens", {}).get(self._resource)
        if not isinstance(raw, dict):
            return None
        raw = dict(raw)
        expires_at = raw.pop("expires_at", None)
        if isinstance(expires_at, (int, float)):
            raw["expires_in"] = max(0, int(expires_at - time.time()))
        token = OAuthToken.model_validate(raw)
        if self._on_tokens is not None:
            self._on_tokens(token)
        return token

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        raw = (await self._entry()).get("client")
        return OAuthClientInformationFull.model_validate(raw) if isinstance(raw, dict) else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        if self._on_tokens is not None:
            self._on_tokens(tokens)
        raw = tokens.model_dump(mode="json", exclude_none=True)
        if tokens.expires_in is not None:
            raw["expires_at"] = time.time() + tokens.expires_in
        raw.pop("expires_in", None)
        await self._update(
            lambda entry: entry.setdefault("tokens", {}).update({self._resource: raw})
        )

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        raw = client_info.model_dump(mode="json", exclude_none=True)
        await self._update(lambda entry: entry.update({"client": raw}), client_info.issuer)

    async def _update(
        self, change: Callable[[dict[str, Any]], None], issuer: str | None = None
    ) -> None:
        async with self._lock:
            for attempt in range(3):
                try:
                    await self._change(change, issuer)
                    return
                except StoreConflict:
                    if attempt == 2:
                        raise

    async def _change(self, change: Callable[[dict[str, Any]], None], issuer: str | None) -> None:
        document = await self._store.read()
        resources = document.setdefault("resources", {})
        issuer = self._issuer() or issuer or resources.get(self._resource)
        if issuer is None:
            issuer = f"unknown issuer of {self._resource}"
        issuers = document.setdefault("issuers", {})
        if resources.get(self._resource) != issuer:
            # Another authorization server now: what this resource held elsewhere is not
            # carried over (the tokens are that server's).
            resources[self._resource] = issuer
            issuers.setdefault(issuer, {}).get("tokens", {}).pop(self._resource, None)
        change(issuers.setdefault(issuer, {}))
        await self._store.write(document)
