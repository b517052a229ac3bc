"""OAuth for MCP servers, the pure and local parts: settings, the consent desk, the credential
store, and the answer to a server's form. The flows themselves run against real authorization
servers in tests/integration/test_mcp_oauth.py and the conformance suite."""

from __future__ import annotations

import asyncio
import json
import stat
import time
from pathlib import Path
from urllib.parse import parse_qsl

import pytest
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from ankka._kernel.errors import ConfigurationError, NotFound, RequestError
from ankka.runtime.features.mcp.config import parse_environment
from ankka.runtime.features.mcp.consent import ConsentDesk
from ankka.runtime.features.mcp.credentials import (
    FileStore,
    IssuerStorage,
    MemoryStore,
    SecretStore,
    store_from,
)
from ankka.runtime.features.mcp.elicitation import accepted
from ankka.runtime.features.mcp.oauth import build_auth
from ankka.runtime.features.mcp.oauth_settings import OAuthSettings

URL = "ANKKA_MCP_DOCS_URL"
SECRET = "cs-canary-5d1e9a"


def _env(**oauth: str) -> dict[str, str]:
    env = {URL: "http://127.0.0.1:9/mcp"}
    env.update({f"ANKKA_MCP_DOCS_{k.upper()}": v for k, v in oauth.items()})
    return env


def test_client_credentials_settings_are_read_and_their_secret_kept_out_of_repr() -> None:
    env = _env(
        oauth="client_credentials",
        oauth_client_id="agent",
        oauth_client_secret=SECRET,
        oauth_issuer="https://auth.example",
    )
    settings = parse_environment(env, ["docs"])["docs"]
    assert settings.oauth is not None and settings.oauth.flow == "client_credentials"
    assert settings.oauth.client_secret == SECRET
    assert SECRET in settings.secrets
    assert SECRET not in repr(settings)


def test_workload_identity_settings_are_read_and_the_workloads_jwt_kept_out_of_repr() -> None:
    env = _env(
        oauth="workload-identity",
        oauth_client_id="workload",
        oauth_issuer="https://auth.example",
        oauth_assertion=SECRET,
    )
    settings = parse_environment(env, ["docs"])["docs"]
    assert settings.oauth is not None and settings.oauth.flow == "workload_identity"
    assert settings.oauth.assertion == SECRET and settings.oauth.client_secret is None
    assert SECRET in settings.secrets
    assert SECRET not in repr(settings)


async def test_a_public_workloads_token_request_carries_its_jwt_and_no_secret() -> None:
    oauth = OAuthSettings(
        flow="workload_identity",
        client_id="workload",
        issuer="https://auth.example",
        assertion=SECRET,
        scope="tools",
    )
    provider = build_auth(
        "docs",
        "https://mcp.example/mcp",
        oauth,
        store=MemoryStore(),
        lock=asyncio.Lock(),
        desk=ConsentDesk(),
        redirect_uri="http://127.0.0.1:8000/v1/mcp/oauth/callback",
        on_tokens=lambda tokens: None,
    )
    assert isinstance(provider, IdentityAssertionOAuthProvider)
    provider._token_endpoint = "https://auth.example/token"
    request = provider._build_token_request("tools", SECRET)
    form = dict(parse_qsl(request.content.decode()))
    assert form == {
        "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
        "assertion": SECRET,
        "client_id": "workload",
        "resource": "https://mcp.example/mcp",
        "scope": "tools",
    }
    assert "authorization" not in request.headers


@pytest.mark.parametrize(
    ("oauth", "named"),
    [
        ({"oauth": "client_credentials", "oauth_client_secret": SECRET}, "OAUTH_CLIENT_ID"),
        (
            {"oauth": "client_credentials", "oauth_client_id": "a", "oauth_client_secret": SECRET},
            "ANKKA_MCP_DOCS_OAUTH_ISSUER",
        ),
        ({"oauth": "password"}, "ANKKA_MCP_DOCS_OAUTH='password' is not one of"),
        ({"oauth_client_id": "a"}, "ANKKA_MCP_DOCS_OAUTH_CLIENT_ID is set but"),
        ({"oauth": "consent", "oauth_client_metadata_url": "http://x/c"}, "https URL"),
        ({"oauth": "identity_assertion", "oauth_client_id": "a"}, "OAUTH_IDP_TOKEN_ENDPOINT"),
        ({"oauth": "consent", "oauth_token_endpoint_auth": "tls"}, "not one of"),
        (
            {"oauth": "workload_identity", "oauth_client_id": "w", "oauth_assertion": SECRET},
            "workload_identity needs ANKKA_MCP_DOCS_OAUTH_ISSUER",
        ),
        (
            {"oauth": "workload_identity", "oauth_client_id": "w", "oauth_issuer": "https://a"},
            "OAUTH_ASSERTION or OAUTH_ASSERTION_FILE",
        ),
        (
            {
                "oauth": "workload_identity",
                "oauth_client_id": "w",
                "oauth_issuer": "https://a",
                "oauth_assertion": SECRET,
                "oauth_token_endpoint_auth": "client_secret_basic",
            },
            "needs ANKKA_MCP_DOCS_OAUTH_CLIENT_SECRET",
        ),
    ],
)
def test_a_wrong_oauth_setting_is_refused_naming_it(oauth: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named) as caught:
        parse_environment(_env(**oauth), ["docs"])
    assert SECRET not in str(caught.value)


def test_an_unknown_oauth_setting_is_no_setting() -> None:
    with pytest.raises(ConfigurationError, match="ANKKA_MCP_DOCS_OAUTH_FLAVOUR is not a setting"):
        parse_environment(_env(oauth="consent", oauth_flavour="x"), ["docs"])


def test_the_credentials_variable_is_no_server_setting() -> None:
    env = {**_env(), "ANKKA_MCP_CREDENTIALS": "file:/tmp/c.json"}
    assert list(parse_environment(env, ["docs"])) == ["docs"]


def test_the_credentials_place_is_a_file_a_secret_or_memory(tmp_path: Path) -> None:
    assert isinstance(store_from(None), MemoryStore)
    assert isinstance(store_from(f"file:{tmp_path}/c.json"), FileStore)
    assert isinstance(store_from("secret:mcp-credentials"), SecretStore)
    with pytest.raises(ConfigurationError, match="neither file:PATH nor secret:NAME"):
        store_from("vault:x")


async def test_a_consent_is_completed_once_by_its_state() -> None:
    desk = ConsentDesk()
    redirect, callback = desk.handlers("docs")
    await redirect("https://auth.example/authorize?client_id=c&state=s-123")
    assert desk.waiting("docs") and desk.pending()[0].url.endswith("state=s-123")
    waiting = asyncio.ensure_future(callback())
    await asyncio.sleep(0)
    assert desk.complete(state="s-123", code="the-code", iss="https://auth.example") == "docs"
    result = await waiting
    assert (result.code, result.state, result.iss) == ("the-code", "s-123", "https://auth.example")
    with pytest.raises(NotFound):
        desk.complete(state="s-123", code="again")
    assert not desk.waiting("docs")


async def test_an_unknown_state_completes_nothing_and_a_refusal_fails_the_flow() -> None:
    desk = ConsentDesk()
    redirect, callback = desk.handlers("docs")
    await redirect("https://auth.example/authorize?state=s-1")
    with pytest.raises(NotFound):
        desk.complete(state="s-2", code="c")
    waiting = asyncio.ensure_future(callback())
    await asyncio.sleep(0)
    desk.complete(state="s-1", code=None, error="access_denied")
    with pytest.raises(RequestError, match="access_denied"):
        await waiting


async def test_a_consent_nobody_gives_ends_the_attempt() -> None:
    desk = ConsentDesk(timeout=0.01)
    redirect, callback = desk.handlers("docs")
    await redirect("https://auth.example/authorize?state=s-1")
    with pytest.raises(RequestError, match="nobody consented"):
        await callback()
    assert desk.pending() == []


def _storage(store: MemoryStore | FileStore, issuer: list[str | None]) -> IssuerStorage:
    return IssuerStorage(store, "https://mcp.example/mcp", lambda: issuer[0], lock=asyncio.Lock())


async def test_tokens_are_kept_per_issuer_with_the_time_they_expire(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    issuer: list[str | None] = ["https://auth.example/"]
    storage = _storage(FileStore(path), issuer)
    client = OAuthClientInformationFull(client_id="c-1", redirect_uris=None)
    await storage.set_client_info(client)
    await storage.set_tokens(
        OAuthToken(access_token="at", refresh_token="rt", expires_in=3600, token_type="Bearer")
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    document = json.loads(path.read_text())
    assert document["resources"] == {"https://mcp.example/mcp": "https://auth.example/"}
    saved = document["issuers"]["https://auth.example/"]["tokens"]["https://mcp.example/mcp"]
    assert abs(saved["expires_at"] - (time.time() + 3600)) < 60

    again = _storage(FileStore(path), [None])  # a restart: the issuer is not discovered yet
    tokens = await again.get_tokens()
    assert tokens is not None and tokens.refresh_token == "rt"
    assert tokens.expires_in is not None and 3500 < tokens.expires_in <= 3600
    assert (await again.get_client_info()) == client


async def test_another_issuer_for_the_resource_leaves_the_old_tokens_behind() -> None:
    store = MemoryStore()
    issuer: list[str | None] = ["https://one.example/"]
    storage = _storage(store, issuer)
    await storage.set_tokens(OAuthToken(access_token="at-1", token_type="Bearer"))
    issuer[0] = "https://two.example/"
    await storage.set_client_info(OAuthClientInformationFull(client_id="c-2", redirect_uris=None))
    assert await storage.get_tokens() is None
    document = await store.read()
    assert document["resources"]["https://mcp.example/mcp"] == "https://two.example/"


def test_a_form_answer_takes_the_defaults_for_fields_left_empty() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "status": {"type": "string", "enum": ["active", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
            "note": {"type": "string"},
        },
        "required": ["name"],
    }
    assert accepted(schema, {"age": 41}) == {
        "name": "John Doe",
        "age": 41,
        "status": "active",
        "verified": True,
    }


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ({"age": "forty"}, "'age' takes a integer"),
        ({"age": True}, "'age' takes a integer"),
        ({"status": "gone"}, "takes one of"),
        ({"colour": "red"}, "no field 'colour'"),
    ],
)
def test_a_form_answer_that_does_not_fit_the_schema_is_refused(
    given: dict[str, object], problem: str
) -> None:
    schema = {
        "type": "object",
        "properties": {
            "age": {"type": "integer"},
            "status": {"type": "string", "enum": ["active", "pending"]},
        },
    }
    with pytest.raises(RequestError, match=problem):
        accepted(schema, given)


def test_a_required_field_without_value_or_default_is_refused() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    with pytest.raises(RequestError, match="'name' is required"):
        accepted(schema, {})
