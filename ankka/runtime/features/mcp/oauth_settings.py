"""OAuth for an MCP server, from ``ANKKA_MCP_<SERVER>_OAUTH*`` (pure; docs/mcp.md, "OAuth").

An MCP server behind OAuth 2.1 answers 401 with ``WWW-Authenticate``; the client then finds its
authorization server (protected-resource metadata, then authorization-server metadata, with the
2025-03-26 fallbacks), registers or identifies itself (pre-registration, a client ID metadata
document, or dynamic registration), chooses scopes (the challenge's ``scope``, else the
resource's ``scopes_supported``, else none; a 403 ``insufficient_scope`` steps up), and obtains
a token with one of these flows (``ANKKA_MCP_<SERVER>_OAUTH``):

- ``consent``: the authorization code grant with PKCE, for a person's consent: the console
  shows the authorization link, the authorization server sends the person back to the
  runtime's ``/v1/mcp/oauth/callback``, and the runtime exchanges the code;
- ``client_credentials``: for an agent running unattended: the client's own secret
  (``OAUTH_CLIENT_SECRET``) or a signed JWT (``OAUTH_PRIVATE_KEY``, RFC 7523), sent only to
  the authorization server ``OAUTH_ISSUER`` names;
- ``identity_assertion``: SEP-990 (enterprise-managed authorization): an ID token from an
  identity provider (a file, e.g. a projected Kubernetes service-account token, or a value) is
  exchanged there for an identity assertion grant, which the server's authorization server turns
  into an access token;
- ``workload_identity``: SEP-1933 (workload identity federation): the workload's own JWT (a
  file read at each exchange, e.g. a projected Kubernetes service-account token whose audience
  is the authorization server, or a value) is the grant (RFC 7523 section 2.1), sent only to the
  authorization server ``OAUTH_ISSUER`` names, by a public client (its JWT is its proof) or one
  with a secret.

Every value named ``*_SECRET``, ``*_PRIVATE_KEY``, ``*_ID_TOKEN`` or ``*_ASSERTION`` is a
secret: never logged, journaled or shown in an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ankka._kernel.errors import ConfigurationError

__all__ = ["FLOWS", "OAUTH_SUFFIXES", "OAuthSettings", "parse_oauth"]

FLOWS = ("consent", "client_credentials", "identity_assertion", "workload_identity")
AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
SIGNING_ALGORITHMS = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256")
OAUTH_SUFFIXES: dict[str, str] = {
    "OAUTH": f"the OAuth flow: {', '.join(FLOWS)}",
    "OAUTH_CLIENT_ID": "a client id registered with the authorization server (pre-registration)",
    "OAUTH_CLIENT_SECRET": "that client's secret (a secret)",
    "OAUTH_TOKEN_ENDPOINT_AUTH": f"how the client authenticates at the token endpoint: "
    f"{', '.join(AUTH_METHODS)}",
    "OAUTH_PRIVATE_KEY": "a PEM private key signing client assertions (private_key_jwt; a secret)",
    "OAUTH_SIGNING_ALGORITHM": f"the assertion's algorithm: {', '.join(SIGNING_ALGORITHMS)}",
    "OAUTH_ISSUER": "the authorization server the client's credentials belong to",
    "OAUTH_SCOPE": "scopes to ask for (space-separated) instead of the server's challenge",
    "OAUTH_CLIENT_METADATA_URL": "an https URL of the client's metadata document (its client id)",
    "OAUTH_REDIRECT_URI": "where the authorization server sends the person back "
    "(default: this runtime's /v1/mcp/oauth/callback)",
    "OAUTH_IDP_TOKEN_ENDPOINT": "the identity provider's token endpoint (identity_assertion)",
    "OAUTH_IDP_CLIENT_ID": "this client's id at the identity provider (identity_assertion)",
    "OAUTH_ID_TOKEN": "the ID token to exchange (identity_assertion; a secret)",
    "OAUTH_ID_TOKEN_FILE": "a file with the ID token, read at each exchange (identity_assertion)",
    "OAUTH_ASSERTION": "the workload's JWT, the grant (workload_identity; a secret)",
    "OAUTH_ASSERTION_FILE": "a file with the workload's JWT, read at each exchange "
    "(workload_identity)",
}
SECRET_SUFFIXES = ("OAUTH_CLIENT_SECRET", "OAUTH_PRIVATE_KEY", "OAUTH_ID_TOKEN", "OAUTH_ASSERTION")
MAX_VALUE = 16384


@dataclass(frozen=True, slots=True)
class OAuthSettings:
    """How one server's tokens are obtained. Secret fields never appear in ``repr``."""

    flow: str
    client_id: str | None = None
    client_secret: str | None = None
    token_endpoint_auth: str | None = None
    private_key: str | None = None
    signing_algorithm: str = "RS256"
    issuer: str | None = None
    scope: str | None = None
    client_metadata_url: str | None = None
    redirect_uri: str | None = None
    idp_token_endpoint: str | None = None
    idp_client_id: str | None = None
    id_token: str | None = None
    id_token_file: str | None = None
    assertion: str | None = None
    assertion_file: str | None = None

    @property
    def secrets(self) -> tuple[str, ...]:
        values = (self.client_secret, self.private_key, self.id_token, self.assertion)
        return tuple(v for v in values if v)

    def __repr__(self) -> str:
        return (
            f"OAuthSettings(flow={self.flow!r}, client_id={self.client_id!r}, "
            f"issuer={self.issuer!r}, scope={self.scope!r})"
        )


def parse_oauth(values: Mapping[str, str], env: Callable[[str], str]) -> OAuthSettings | None:
    """The server's OAuth settings from its ``OAUTH*`` values (``env`` names a suffix's
    variable, for errors), or None when ``OAUTH`` is not set."""
    for suffix, value in values.items():
        if suffix.startswith("OAUTH") and (len(value) > MAX_VALUE or "\x00" in value):
            raise ConfigurationError(f"{env(suffix)}: the value is too long or not text")
    present = sorted(s for s in values if s.startswith("OAUTH"))
    raw_flow = values.get("OAUTH", "").strip()
    if not raw_flow:
        if present:
            raise ConfigurationError(
                f"{env(present[0])} is set but {env('OAUTH')} is not: "
                f"set it to the flow ({', '.join(FLOWS)})"
            )
        return None
    flow = raw_flow.lower().replace("-", "_")
    if flow not in FLOWS:
        raise ConfigurationError(f"{env('OAUTH')}={raw_flow!r} is not one of {', '.join(FLOWS)}")

    def get(suffix: str) -> str | None:
        value = values.get(suffix)
        if value is None:
            return None
        return value if suffix in SECRET_SUFFIXES else (value.strip() or None)

    settings = OAuthSettings(
        flow=flow,
        client_id=get("OAUTH_CLIENT_ID"),
        client_secret=get("OAUTH_CLIENT_SECRET"),
        token_endpoint_auth=get("OAUTH_TOKEN_ENDPOINT_AUTH"),
        private_key=get("OAUTH_PRIVATE_KEY"),
        signing_algorithm=get("OAUTH_SIGNING_ALGORITHM") or "RS256",
        issuer=get("OAUTH_ISSUER"),
        scope=get("OAUTH_SCOPE"),
        client_metadata_url=get("OAUTH_CLIENT_METADATA_URL"),
        redirect_uri=get("OAUTH_REDIRECT_URI"),
        idp_token_endpoint=get("OAUTH_IDP_TOKEN_ENDPOINT"),
        idp_client_id=get("OAUTH_IDP_CLIENT_ID"),
        id_token=get("OAUTH_ID_TOKEN"),
        id_token_file=get("OAUTH_ID_TOKEN_FILE"),
        assertion=get("OAUTH_ASSERTION"),
        assertion_file=get("OAUTH_ASSERTION_FILE"),
    )
    _check(settings, env)
    return settings


def _check(s: OAuthSettings, name: Callable[[str], str]) -> None:
    if s.token_endpoint_auth is not None and s.token_endpoint_auth not in AUTH_METHODS:
        raise ConfigurationError(
            f"{name('OAUTH_TOKEN_ENDPOINT_AUTH')}={s.token_endpoint_auth!r} is not one of "
            f"{', '.join(AUTH_METHODS)}"
        )
    if s.signing_algorithm not in SIGNING_ALGORITHMS:
        raise ConfigurationError(
            f"{name('OAUTH_SIGNING_ALGORITHM')}={s.signing_algorithm!r} is not one of "
            f"{', '.join(SIGNING_ALGORITHMS)}"
        )
    for suffix, url in (
        ("OAUTH_ISSUER", s.issuer),
        ("OAUTH_REDIRECT_URI", s.redirect_uri),
        ("OAUTH_IDP_TOKEN_ENDPOINT", s.idp_token_endpoint),
    ):
        if url is not None and not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"{name(suffix)}={url!r} is not an http(s) URL")
    if s.client_metadata_url is not None and not s.client_metadata_url.startswith("https://"):
        raise ConfigurationError(
            f"{name('OAUTH_CLIENT_METADATA_URL')}={s.client_metadata_url!r}: a client ID "
            "metadata document is named by an https URL"
        )
    if s.client_secret is not None and s.client_id is None:
        raise ConfigurationError(
            f"{name('OAUTH_CLIENT_SECRET')} is set without {name('OAUTH_CLIENT_ID')}"
        )
    if s.flow == "client_credentials":
        if s.client_id is None or (s.client_secret is None) == (s.private_key is None):
            raise ConfigurationError(
                f"{name('OAUTH')}=client_credentials needs {name('OAUTH_CLIENT_ID')} and one of "
                f"{name('OAUTH_CLIENT_SECRET')} or {name('OAUTH_PRIVATE_KEY')}"
            )
        if s.issuer is None:
            # Without it the MCP server would decide where the client's credentials go.
            raise ConfigurationError(
                f"{name('OAUTH')}=client_credentials needs {name('OAUTH_ISSUER')}: the "
                "authorization server the credentials belong to (they are sent nowhere else)"
            )
        if s.token_endpoint_auth == "none":
            raise ConfigurationError(
                f"{name('OAUTH_TOKEN_ENDPOINT_AUTH')}=none: the client credentials flow "
                "authenticates the client"
            )
    if s.flow == "identity_assertion":
        _needs(
            s.flow,
            {
                "OAUTH_CLIENT_ID": s.client_id,
                "OAUTH_CLIENT_SECRET": s.client_secret,
                "OAUTH_ISSUER": s.issuer,
                "OAUTH_IDP_TOKEN_ENDPOINT": s.idp_token_endpoint,
                "OAUTH_IDP_CLIENT_ID": s.idp_client_id,
            },
            ("OAUTH_ID_TOKEN", s.id_token, "OAUTH_ID_TOKEN_FILE", s.id_token_file),
            name,
        )
    if s.flow == "workload_identity":
        # Without an issuer the MCP server would decide where the workload's JWT goes.
        _needs(
            s.flow,
            {"OAUTH_CLIENT_ID": s.client_id, "OAUTH_ISSUER": s.issuer},
            ("OAUTH_ASSERTION", s.assertion, "OAUTH_ASSERTION_FILE", s.assertion_file),
            name,
        )
        public = (s.token_endpoint_auth or "none") == "none"
        if s.token_endpoint_auth is not None and public != (s.client_secret is None):
            raise ConfigurationError(
                f"{name('OAUTH_TOKEN_ENDPOINT_AUTH')}={s.token_endpoint_auth!r} "
                + ("is for a client without " if public else "needs ")
                + name("OAUTH_CLIENT_SECRET")
            )


def _needs(
    flow: str,
    each: Mapping[str, str | None],
    one_of: tuple[str, str | None, str, str | None],
    name: Callable[[str], str],
) -> None:
    """Refuse ``flow`` naming every setting of ``each`` that is missing, and the pair of
    ``one_of`` (a value or a file) unless exactly one is set."""
    missing = [name(suffix) for suffix, value in each.items() if value is None]
    value, file = one_of[1], one_of[3]
    if (value is None) == (file is None):
        missing.append(f"{one_of[0]} or {one_of[2]} (one)")
    if missing:
        raise ConfigurationError(f"{name('OAUTH')}={flow} needs " + ", ".join(missing))
