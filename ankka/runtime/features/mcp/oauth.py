"""The httpx2 ``Auth`` that gets an MCP server's OAuth tokens: the official SDK's providers.

The SDK's ``mcp.client.auth`` implements the specification's authorization section (discovery
of the protected resource and its authorization server with the 2025-03-26 fallbacks, client
ID metadata documents and dynamic registration, scope selection from ``WWW-Authenticate`` and
step-up, PKCE, RFC 8707 resource indicators, the token endpoint's auth methods, refresh), so
ankka builds one of its providers per server from :class:`~.oauth_settings.OAuthSettings`:

- ``consent``: ``OAuthClientProvider`` (authorization code with PKCE), its redirect and
  callback handlers a :class:`~.consent.ConsentDesk`'s; a pre-registered client
  (``OAUTH_CLIENT_ID``) is given to it as the stored registration;
- ``client_credentials``: ``ClientCredentialsOAuthProvider`` (a secret) or
  ``PrivateKeyJWTOAuthProvider`` (an RFC 7523 assertion the SDK signs with the key);
- ``identity_assertion``: ``IdentityAssertionOAuthProvider`` (SEP-990), given an ID-JAG that
  :func:`exchange_id_token` obtains from the identity provider (RFC 8693 token exchange, the
  leg the SDK leaves to its caller);
- ``workload_identity``: the same provider (SEP-1933 has the same grant, RFC 7523 jwt-bearer,
  and the same trust: the authorization server is configuration), given the workload's own JWT,
  and allowed a public client (:class:`_WorkloadIdentity`).

What ankka adds: where tokens live (:mod:`.credentials`, per issuer), a stored token's expiry
surviving a restart (so it is refreshed, not sent expired), refreshing a little before the
expiry the server gave (clocks and rounding differ), and every token it sees given to
``on_tokens`` so the connection can redact it from anything a server echoes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, cast

import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthTokenError
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.client.auth.oauth2 import OAuthContext
from mcp.shared.auth import (
    JWT_BEARER_GRANT_TYPE,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

from ankka.runtime.declare.mcp import CALLBACK_PATH
from ankka.runtime.features.mcp.consent import ConsentDesk
from ankka.runtime.features.mcp.credentials import CredentialStore, IssuerStorage
from ankka.runtime.features.mcp.oauth_settings import OAuthSettings

__all__ = ["CALLBACK_PATH", "build_auth", "exchange_id_token"]

CLIENT_NAME = "ankka"
EXPIRY_MARGIN = 30.0
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
_SecretMethod = Literal["client_secret_basic", "client_secret_post"]


@dataclass
class _EarlyExpiry(OAuthContext):
    """A token counts as expired a little before the authorization server says (at most
    :data:`EXPIRY_MARGIN` seconds, half its life at most), so it is refreshed before a server
    whose clock is ahead, or that rounds its expiry down, refuses it: a 401 sends the SDK to
    the full flow, which for ``consent`` means asking the person again."""

    def update_token_expiry(self, token: OAuthToken) -> None:
        super().update_token_expiry(token)
        if self.token_expiry_time is not None and token.expires_in:
            self.token_expiry_time -= min(EXPIRY_MARGIN, token.expires_in / 2)


class _ReloadsExpiry(OAuthClientProvider):
    """A token read back from the store keeps the time it expires (the SDK's own loading
    forgets it, and would send an expired token instead of refreshing it), and every token
    is refreshed a little early (:class:`_EarlyExpiry`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        context = self.context
        self.context = _EarlyExpiry(**{f.name: getattr(context, f.name) for f in fields(context)})

    async def _initialize(self) -> None:
        await super()._initialize()
        tokens = self.context.current_tokens
        if tokens is not None:
            self.context.update_token_expiry(tokens)


class _Consent(_ReloadsExpiry):
    pass


class _ClientCredentials(_ReloadsExpiry, ClientCredentialsOAuthProvider):
    pass


class _PrivateKeyJWT(_ReloadsExpiry, PrivateKeyJWTOAuthProvider):
    pass


class _PreRegistered(IssuerStorage):
    """The stored registration is the configured client's, whatever the store holds."""

    def __init__(self, client: OAuthClientInformationFull, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client = client

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client


def build_auth(
    server: str,
    url: str,
    oauth: OAuthSettings,
    *,
    store: CredentialStore,
    lock: asyncio.Lock,
    desk: ConsentDesk,
    redirect_uri: str,
    on_tokens: Callable[[OAuthToken], None],
) -> httpx2.Auth:
    """The provider for one server; ``redirect_uri`` is where a person is sent back to (the
    runtime's callback) unless ``OAUTH_REDIRECT_URI`` says otherwise."""
    holder: list[OAuthClientProvider] = []

    def issuer() -> str | None:
        if not holder:
            return oauth.issuer
        context = holder[0].context
        if context.auth_server_url:
            return context.auth_server_url
        return str(context.oauth_metadata.issuer) if context.oauth_metadata else oauth.issuer

    storage_args = (store, url, issuer)
    storage_kwargs: dict[str, Any] = {"lock": lock, "on_tokens": on_tokens}
    storage = IssuerStorage(*storage_args, **storage_kwargs)
    if oauth.flow == "identity_assertion":
        return _identity_assertion(url, oauth, storage)
    if oauth.flow == "workload_identity":
        return _workload_identity(url, oauth, storage)
    if oauth.flow == "client_credentials":
        assert oauth.client_id is not None  # checked with the settings
        provider: OAuthClientProvider
        if oauth.private_key is not None:
            signer = SignedJWTParameters(
                issuer=oauth.client_id,
                subject=oauth.client_id,
                signing_key=oauth.private_key,
                signing_algorithm=oauth.signing_algorithm,
            )
            provider = _PrivateKeyJWT(
                url,
                storage,
                oauth.client_id,
                signer.create_assertion_provider(),
                scope=oauth.scope,
                issuer=oauth.issuer,
            )
        else:
            assert oauth.client_secret is not None
            method = cast(_SecretMethod, oauth.token_endpoint_auth or "client_secret_basic")
            provider = _ClientCredentials(
                url,
                storage,
                oauth.client_id,
                oauth.client_secret,
                token_endpoint_auth_method=method,
                scope=oauth.scope,
                issuer=oauth.issuer,
            )
        holder.append(provider)
        return provider
    redirect = AnyUrl(oauth.redirect_uri or redirect_uri)
    if oauth.client_id is not None:
        chosen = oauth.token_endpoint_auth or (
            "client_secret_basic" if oauth.client_secret else "none"
        )
        client = OAuthClientInformationFull(
            client_id=oauth.client_id,
            client_secret=oauth.client_secret,
            redirect_uris=[redirect],
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method=cast(Any, chosen),
            issuer=oauth.issuer,
        )
        storage = _PreRegistered(client, *storage_args, **storage_kwargs)
    on_redirect, on_callback = desk.handlers(server)
    provider = _Consent(
        url,
        OAuthClientMetadata(
            client_name=CLIENT_NAME,
            redirect_uris=[redirect],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage,
        redirect_handler=on_redirect,
        callback_handler=on_callback,
        client_metadata_url=oauth.client_metadata_url,
    )
    holder.append(provider)
    return provider


def _identity_assertion(
    url: str, oauth: OAuthSettings, storage: IssuerStorage
) -> IdentityAssertionOAuthProvider:
    assert oauth.client_id and oauth.client_secret and oauth.issuer
    assert oauth.idp_token_endpoint and oauth.idp_client_id

    async def id_token() -> str:
        if oauth.id_token is not None:
            return oauth.id_token
        assert oauth.id_token_file is not None
        return (await asyncio.to_thread(Path(oauth.id_token_file).read_text)).strip()

    async def id_jag(audience: str, resource: str) -> str:
        return await exchange_id_token(
            oauth.idp_token_endpoint or "",
            client_id=oauth.idp_client_id or "",
            id_token=await id_token(),
            audience=audience,
            resource=resource,
            scope=oauth.scope,
        )

    method = cast(_SecretMethod, oauth.token_endpoint_auth or "client_secret_basic")
    return IdentityAssertionOAuthProvider(
        url,
        storage,
        oauth.client_id,
        oauth.client_secret,
        oauth.issuer,
        id_jag,
        scope=oauth.scope,
        token_endpoint_auth_method=method,
    )


class _WorkloadIdentity(IdentityAssertionOAuthProvider):
    """The SDK's jwt-bearer provider for a workload's JWT (SEP-1933). The SDK's takes
    confidential clients only (SEP-990's are), but a workload is often a public client, its JWT
    its proof: without a secret, the token request carries the client id alone (``none``).
    The provider keeps the SDK's behaviour otherwise: the grant goes only to the configured
    issuer's token endpoint, and a refusal is an error, neither retried nor another grant."""

    def __init__(
        self,
        url: str,
        storage: IssuerStorage,
        oauth: OAuthSettings,
        assertion: Callable[[str, str], Awaitable[str]],
    ) -> None:
        assert oauth.client_id and oauth.issuer
        method = cast(_SecretMethod, oauth.token_endpoint_auth or "client_secret_basic")
        super().__init__(
            url,
            storage,
            oauth.client_id,
            oauth.client_secret or "(public client)",  # replaced below
            oauth.issuer,
            assertion,
            scope=oauth.scope,
            token_endpoint_auth_method=method,
        )
        self._public = oauth.client_secret is None
        if self._public:
            self._client = self._client.model_copy(
                update={"client_secret": None, "token_endpoint_auth_method": "none"}
            )

    def _build_token_request(self, scope: str | None, assertion: str) -> httpx2.Request:
        if not self._public:
            return super()._build_token_request(scope, assertion)
        assert self._token_endpoint is not None and self._client.client_id is not None
        data = {
            "grant_type": JWT_BEARER_GRANT_TYPE,
            "assertion": assertion,
            "client_id": self._client.client_id,
            "resource": self._resource,
        }
        if scope:
            data["scope"] = scope
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        return httpx2.Request("POST", self._token_endpoint, data=data, headers=headers)


def _workload_identity(url: str, oauth: OAuthSettings, storage: IssuerStorage) -> _WorkloadIdentity:
    async def assertion(audience: str, resource: str) -> str:
        if oauth.assertion is not None:
            return oauth.assertion
        assert oauth.assertion_file is not None
        return (await asyncio.to_thread(Path(oauth.assertion_file).read_text)).strip()

    return _WorkloadIdentity(url, storage, oauth, assertion)


async def exchange_id_token(
    token_endpoint: str,
    *,
    client_id: str,
    id_token: str,
    audience: str,
    resource: str,
    scope: str | None = None,
    http: Callable[[], httpx2.AsyncClient] = lambda: httpx2.AsyncClient(timeout=30.0),
) -> str:
    """An identity assertion grant (ID-JAG) for ``audience`` (the MCP authorization server)
    and ``resource`` (the MCP server), from the identity provider's token endpoint (RFC 8693)."""
    form = {
        "grant_type": TOKEN_EXCHANGE,
        "requested_token_type": ID_JAG_TYPE,
        "subject_token": id_token,
        "subject_token_type": ID_TOKEN_TYPE,
        "audience": audience,
        "resource": resource,
        "client_id": client_id,
    }
    if scope:
        form["scope"] = scope
    async with http() as client:
        response = await client.post(token_endpoint, data=form)
    if response.status_code != 200:
        # The body may quote what was sent; only the status and the error code are kept.
        code = _error_code(response)
        raise OAuthTokenError(
            f"the identity provider refused the token exchange ({response.status_code} {code})"
        )
    body = response.json()
    token = body.get("access_token") if isinstance(body, dict) else None
    if not isinstance(token, str) or body.get("issued_token_type") != ID_JAG_TYPE:
        raise OAuthTokenError("the identity provider's answer carries no identity assertion grant")
    return token


def _error_code(response: httpx2.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return "no error code"
    code = body.get("error") if isinstance(body, dict) else None
    return str(code)[:60] if isinstance(code, str) else "no error code"
