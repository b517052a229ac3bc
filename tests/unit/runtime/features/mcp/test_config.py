"""MCP servers from the environment (ANKKA_MCP_<SERVER>_<SETTING>) and their declaration."""

from __future__ import annotations

import pytest

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.declare.mcp import McpServer
from ankka.runtime.features.mcp.config import parse_environment
from ankka.runtime.features.mcp.setup import servers_from_environment

URL = {"ANKKA_MCP_CATALOG_URL": "http://127.0.0.1:9/mcp"}


def test_a_server_with_headers_is_read() -> None:
    env = {
        **URL,
        "ANKKA_MCP_CATALOG_HEADER_AUTHORIZATION": "Bearer s3cret",
        "ANKKA_MCP_CATALOG_HEADER_X_API_KEY": "k3y",
        "ANKKA_MCP_CATALOG_TIMEOUT": "5",
        "PATH": "/bin",
    }
    server = parse_environment(env, ["catalog"])["catalog"]
    assert server.url == "http://127.0.0.1:9/mcp"
    assert dict(server.headers) == {"authorization": "Bearer s3cret", "x-api-key": "k3y"}
    assert server.timeout == 5.0
    assert "s3cret" not in repr(server) and "k3y" not in repr(server)


def test_server_names_with_dashes_use_underscores() -> None:
    env = {"ANKKA_MCP_MY_DOCS_URL": "https://docs/mcp"}
    assert parse_environment(env, ["my-docs"])["my-docs"].url == "https://docs/mcp"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({**URL, "ANKKA_MCP_CATALOG_URLS": "x"}, "ANKKA_MCP_CATALOG_URLS is not a setting"),
        ({**URL, "ANKKA_MCP_CATALOGUE_URL": "x"}, "ANKKA_MCP_CATALOGUE_URL is not a setting"),
        ({}, "ANKKA_MCP_CATALOG_URL is not set"),
        ({"ANKKA_MCP_CATALOG_URL": "catalog:80"}, "is not an http(s) URL"),
        ({**URL, "ANKKA_MCP_CATALOG_TIMEOUT": "0"}, "ANKKA_MCP_CATALOG_TIMEOUT='0'"),
        ({**URL, "ANKKA_MCP_CATALOG_HEADER_": "v"}, "ANKKA_MCP_CATALOG_HEADER_"),
    ],
)
def test_a_wrong_setting_is_refused_naming_it(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_environment(env, ["catalog"])
    assert named in str(caught.value)


def test_a_refused_header_value_is_never_shown() -> None:
    env = {**URL, "ANKKA_MCP_CATALOG_HEADER_AUTHORIZATION": "canary-9f3\nsecond line"}
    with pytest.raises(ConfigurationError) as caught:
        parse_environment(env, ["catalog"])
    assert "ANKKA_MCP_CATALOG_HEADER_AUTHORIZATION" in str(caught.value)
    assert "canary-9f3" not in str(caught.value)


def test_approval_is_declared_in_code_or_set_in_the_environment() -> None:
    assert McpServer("catalog", requires_approval=("delete_item",)).needs_approval("delete_item")
    assert not McpServer("catalog", requires_approval=("delete_item",)).needs_approval("search")
    assert McpServer("catalog", requires_approval=True).needs_approval("search")
    every = parse_environment({**URL, "ANKKA_MCP_CATALOG_REQUIRES_APPROVAL": "all"}, ["catalog"])
    assert every["catalog"].needs_approval("anything")
    some = parse_environment(
        {**URL, "ANKKA_MCP_CATALOG_REQUIRES_APPROVAL": "delete_item, refund"}, ["catalog"]
    )
    assert some["catalog"].requires_approval == ("delete_item", "refund")
    assert not some["catalog"].needs_approval("search")


def test_a_server_listed_twice_or_badly_named_is_refused() -> None:
    service = Service("shop")

    def handler(request: TurnRequest) -> Turn:
        return Turn(message=request.message)

    with pytest.raises(ConfigurationError, match="twice"):
        service.agent("a", mcp_servers=["catalog", McpServer("catalog")])(handler)
    with pytest.raises(ConfigurationError, match="lower-case"):
        service.agent("b", mcp_servers=["Catalog"])(handler)
    with pytest.raises(ConfigurationError, match="ambiguous"):
        service.agent("c", mcp_servers=["x_header_y"])(handler)


def test_no_servers_and_no_settings_needs_nothing() -> None:
    assert servers_from_environment(Service("plain"), {"PATH": "/bin"}) is None


def test_a_setting_for_a_server_no_agent_lists_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="they list: none"):
        servers_from_environment(Service("plain"), URL)
