"""An Agent's spec.mcpServers: the ANKKA_MCP_* env it renders, and the entries it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from ankka.api.resources import AgentSpec
from ankka.operator.agents import invalid_reason, runtime_env
from ankka.operator.settings import Settings
from ankka.runtime.features.mcp.config import parse_environment

TOKEN = {"name": "Authorization", "secretKeyRef": {"name": "catalog-token", "key": "bearer"}}


def spec(*servers: dict[str, Any]) -> AgentSpec:
    return AgentSpec.model_validate({"image": "i", "module": "m", "mcpServers": list(servers)})


def test_a_server_renders_its_url_and_headers_through_value_from() -> None:
    s = spec(
        {"name": "my-docs", "url": "https://docs/mcp", "headers": [TOKEN]},
        {"name": "catalog", "url": "http://catalog:8000/mcp"},
    )
    assert invalid_reason(s) is None
    env = {e["name"]: e for e in runtime_env(s, Settings(namespace="p"))}
    assert env["ANKKA_MCP_MY_DOCS_URL"]["value"] == "https://docs/mcp"
    assert env["ANKKA_MCP_MY_DOCS_HEADER_AUTHORIZATION"] == {
        "name": "ANKKA_MCP_MY_DOCS_HEADER_AUTHORIZATION",
        "valueFrom": {"secretKeyRef": {"name": "catalog-token", "key": "bearer"}},
    }
    assert env["ANKKA_MCP_CATALOG_URL"]["value"] == "http://catalog:8000/mcp"


def test_what_the_operator_renders_is_what_the_runtime_reads() -> None:
    s = spec({"name": "my-docs", "url": "https://docs/mcp", "headers": [TOKEN]})
    rendered = {
        e["name"]: e.get("value", "secret-from-the-kubelet")
        for e in runtime_env(s, Settings(namespace="p"))
        if e["name"].startswith("ANKKA_MCP_")
    }
    server = parse_environment(rendered, ["my-docs"])["my-docs"]
    assert server.url == "https://docs/mcp"
    assert dict(server.headers) == {"authorization": "secret-from-the-kubelet"}


def test_requires_approval_is_rendered_as_the_runtime_reads_it() -> None:
    s = spec(
        {"name": "a", "url": "http://a", "requiresApproval": {"tools": ["delete", "refund"]}},
        {"name": "b", "url": "http://b", "requiresApproval": {"all": True}},
    )
    assert invalid_reason(s) is None
    rendered = {
        e["name"]: e["value"]
        for e in runtime_env(s, Settings(namespace="p"))
        if e["name"].startswith("ANKKA_MCP_")
    }
    assert rendered["ANKKA_MCP_A_REQUIRES_APPROVAL"] == "delete,refund"
    servers = parse_environment(rendered, ["a", "b"])
    assert servers["a"].requires_approval == ("delete", "refund")
    assert servers["b"].needs_approval("anything")


@pytest.mark.parametrize(
    ("servers", "named"),
    [
        (
            [{"name": "a-b", "url": "http://a"}, {"name": "a_b", "url": "http://b"}],
            "spec.mcpServers[1].name",
        ),
        ([{"name": "x-header-y", "url": "http://a"}], "spec.mcpServers[0].name"),
        (
            [
                {
                    "name": "a",
                    "url": "http://a",
                    "headers": [TOKEN, {**TOKEN, "name": "authorization"}],
                }
            ],
            "spec.mcpServers[0].headers",
        ),
    ],
)
def test_an_entry_the_runtime_would_refuse_fails_the_agent_naming_the_field(
    servers: list[dict[str, Any]], named: str
) -> None:
    reason = invalid_reason(spec(*servers))
    assert reason is not None and reason.startswith(named), reason
