"""The catalogue (examples/mcp_catalog.py) behind OAuth 2.1, with a small authorization server.

    python examples/mcp_oauth_catalog.py --port 8766 --client ankka:s3cret
    # MCP at http://127.0.0.1:8766/mcp; its authorization server is http://127.0.0.1:8766

The MCP side is the official SDK's resource server: ``MCPServer`` with a token verifier and
``AuthSettings``, so an unauthorised request is answered 401 with ``WWW-Authenticate`` naming
the protected-resource metadata (RFC 9728, also served by the SDK), and a token must carry the
scope ``catalog:read`` and be issued for this resource (RFC 8707).

The authorization server is small and on purpose (the SDK's own has no client-credentials
grant): RFC 8414 metadata, ``/authorize`` (the authorization code grant with PKCE S256; it
consents at once, as a person who clicks "allow" would), ``/token`` (``client_credentials``,
``authorization_code``, ``refresh_token``, rotating refresh tokens; clients authenticate with
``client_secret_basic`` or ``client_secret_post``), clients pre-registered with ``--client
ID:SECRET``. Access tokens live ``--token-seconds`` (default 3600). Each grant is printed
(``oauth catalog: token grant=... client=...``), never a token. ``--echo-credentials`` makes
``/token`` refuse a client it does not know by quoting back everything it was sent (its secret,
a client assertion, an ID token to exchange), as some real servers do: the secret canary test
(tests/integration/test_secret_canary.py) uses it.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ankka._kernel.serve import bind
from examples.mcp_catalog import build

SCOPE = "catalog:read"


@dataclass
class Grant:
    client: str
    scopes: list[str]
    resource: str | None
    expires_at: int | None = None
    redirect_uri: str | None = None
    challenge: str | None = None


class Tokens:
    """Every token and code this server issued, in memory."""

    def __init__(self, lifetime: int) -> None:
        self.lifetime = lifetime
        self.access: dict[str, Grant] = {}
        self.refresh: dict[str, Grant] = {}
        self.codes: dict[str, Grant] = {}

    def issue(self, grant: Grant, *, refresh: bool) -> dict[str, object]:
        token = "at-" + secrets.token_urlsafe(24)
        expires = int(time.time()) + self.lifetime
        self.access[token] = Grant(grant.client, grant.scopes, grant.resource, expires)
        body: dict[str, object] = {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": self.lifetime,
            "scope": " ".join(grant.scopes),
        }
        if refresh:
            value = "rt-" + secrets.token_urlsafe(24)
            self.refresh[value] = Grant(grant.client, grant.scopes, grant.resource)
            body["refresh_token"] = value
        print(f"oauth catalog: token expires_at={expires}", flush=True)
        return body

    async def verify_token(self, token: str) -> AccessToken | None:
        grant = self.access.get(token)
        if grant is None:
            print("oauth catalog: refused an unknown token", flush=True)
            return None
        if grant.expires_at is not None and grant.expires_at <= time.time():
            print("oauth catalog: refused an expired token", flush=True)
            return None
        return AccessToken(
            token=token,
            client_id=grant.client,
            scopes=grant.scopes,
            expires_at=grant.expires_at,
            resource=grant.resource,
        )


def _error(error: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": error}, status_code=status)


def serve(host: str, port: int, clients: dict[str, str], lifetime: int, echo: bool) -> int:
    sock = bind(host, port)
    host, port = sock.getsockname()[:2]
    issuer = f"http://{host}:{port}"
    resource = f"{issuer}/mcp"
    tokens = Tokens(lifetime)
    auth = AuthSettings(
        issuer_url=AnyHttpUrl(issuer),
        resource_server_url=AnyHttpUrl(resource),
        required_scopes=[SCOPE],
        validate_token_resource=True,
    )
    server = build(auth=auth, token_verifier=tokens)

    def client_of(request: Request, form: dict[str, str]) -> tuple[str, str]:
        header = request.headers.get("authorization", "")
        if header.startswith("Basic "):
            given, _, secret = base64.b64decode(header[6:]).decode().partition(":")
        else:
            given, secret = form.get("client_id", ""), form.get("client_secret", "")
        return given, secret

    def known(given: str, secret: str) -> bool:
        expected = clients.get(given)
        return expected is not None and (not expected or secrets.compare_digest(expected, secret))

    @server.custom_route("/.well-known/oauth-authorization-server", methods=["GET"])  # type: ignore[untyped-decorator]
    async def metadata(request: Request) -> Response:
        return JSONResponse(
            {
                # As the SDK's protected-resource metadata names it (a root URL with its "/").
                "issuer": f"{issuer}/",
                "authorization_endpoint": f"{issuer}/authorize",
                "token_endpoint": f"{issuer}/token",
                "response_types_supported": ["code"],
                "grant_types_supported": [
                    "authorization_code",
                    "refresh_token",
                    "client_credentials",
                ],
                "token_endpoint_auth_methods_supported": [
                    "client_secret_basic",
                    "client_secret_post",
                ],
                "code_challenge_methods_supported": ["S256"],
                "scopes_supported": [SCOPE],
            }
        )

    @server.custom_route("/authorize", methods=["GET"])  # type: ignore[untyped-decorator]
    async def authorize(request: Request) -> Response:
        q = request.query_params
        if q.get("client_id") not in clients or q.get("code_challenge_method") != "S256":
            return _error("invalid_request")
        code = "code-" + secrets.token_urlsafe(16)
        scopes = (q.get("scope") or SCOPE).split()
        tokens.codes[code] = Grant(
            q["client_id"],
            scopes,
            q.get("resource"),
            redirect_uri=q.get("redirect_uri"),
            challenge=q.get("code_challenge"),
        )
        print(f"oauth catalog: consented for client={q['client_id']}", flush=True)
        back = {"code": code, "state": q.get("state", ""), "iss": f"{issuer}/"}
        return RedirectResponse(f"{q.get('redirect_uri')}?{urlencode(back)}", status_code=302)

    @server.custom_route("/token", methods=["POST"])  # type: ignore[untyped-decorator]
    async def token(request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        client, secret = client_of(request, form)
        if not known(client, secret):
            if echo:
                print("oauth catalog: refused a client, quoting what it sent", flush=True)
                # Everything the client sent: a secret, a client assertion, an ID token.
                sent = {k: v for k, v in form.items() if k not in ("client_id", "client_secret")}
                text = f"client {client!r} with secret {secret!r} and {sent!r} is not registered"
                return JSONResponse(
                    {"error": "invalid_client", "error_description": text}, status_code=401
                )
            return _error("invalid_client", 401)
        kind = form.get("grant_type", "")
        print(f"oauth catalog: token grant={kind} client={client}", flush=True)
        if kind == "client_credentials":
            scopes = (form.get("scope") or SCOPE).split()
            return JSONResponse(tokens.issue(Grant(client, scopes, resource), refresh=False))
        if kind == "authorization_code":
            grant = tokens.codes.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "").encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=")
            if grant is None or grant.client != client or digest.decode() != grant.challenge:
                return _error("invalid_grant")
            if grant.redirect_uri != form.get("redirect_uri"):
                return _error("invalid_grant")
            return JSONResponse(tokens.issue(grant, refresh=True))
        if kind == "refresh_token":
            grant = tokens.refresh.pop(form.get("refresh_token", ""), None)  # rotated
            if grant is None or grant.client != client:
                return _error("invalid_grant")
            return JSONResponse(tokens.issue(grant, refresh=True))
        return _error("unsupported_grant_type")

    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    print(f"oauth catalog: listening on {resource}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8766, help="0 picks a free one")
    parser.add_argument(
        "--client", action="append", default=[], help="a pre-registered client, ID:SECRET"
    )
    parser.add_argument("--token-seconds", type=int, default=3600)
    parser.add_argument("--echo-credentials", action="store_true")
    args = parser.parse_args(argv)
    clients = dict(c.partition(":")[::2] for c in args.client)
    return serve(args.host, args.port, clients, args.token_seconds, args.echo_credentials)


if __name__ == "__main__":
    raise SystemExit(main())
