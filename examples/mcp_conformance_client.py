"""ankka's MCP client under the official conformance suite (@modelcontextprotocol/conformance).

    python examples/mcp_conformance_client.py URL

The suite starts a test server per client scenario and runs this with the server's URL, the
scenario in ``MCP_CONFORMANCE_SCENARIO`` and, where the scenario hands the client credentials,
JSON in ``MCP_CONFORMANCE_CONTEXT``. Everything goes through the code an agent's turns use: the
scenario becomes ``ANKKA_MCP_CONFORMANCE_*`` settings read by the runtime's own parser, the
session is :class:`~ankka.runtime.features.mcp.servers.McpServers`' (OAuth included), the tools come
from ``tools_for`` and are called with ``McpTool.run``, exactly as in a turn.

What stands in for people and operators:

- **the person who consents** (``OAUTH=consent``): the suite's authorization servers approve at
  once, so this answers the consent like a browser: it opens the authorization link, reads the
  redirect and hands ``code`` and ``state`` to the consent desk, as the runtime's callback route
  does;
- **the person who answers a form** (elicitation): accepts it without filling anything, so
  the schema's defaults are what is sent (:func:`~ankka.runtime.features.mcp.elicitation.accepted`);
- **the operator** who configures a client-credentials, identity-assertion or workload-identity
  client names its authorization server (``OAUTH_ISSUER``); here it is read from the resource's
  metadata first.

``scripts/mcp_conformance.sh`` installs the suite and runs every client scenario with this
(``make conformance``); tests/integration/test_mcp_conformance.py does so in CI.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.context import ClientRequestContext
from mcp_types import ElicitRequestFormParams, ElicitRequestParams, ElicitResult, ErrorData

from ankka.runtime.features.mcp.config import parse_environment
from ankka.runtime.features.mcp.consent import PendingConsent
from ankka.runtime.features.mcp.elicitation import accepted
from ankka.runtime.features.mcp.servers import McpServers, McpTool

SERVER = "conformance"
PREFIX = "ANKKA_MCP_CONFORMANCE_"
# The client ID metadata document the suite's authorization servers expect (they fetch nothing).
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
# What this client, standing in for a model, passes to the suite's tools that take arguments
# (each named with its scenario). A scenario that names its calls in its context (``toolCalls``,
# as http-custom-headers does) has exactly those made instead. Any other tool is called with {}
# when its schema requires nothing, else only listed (json-schema-ref-no-deref's server answers
# tools/list alone: what it judges is that listing fetched nothing).
ARGUMENTS: dict[str, dict[str, Any]] = {
    "add_numbers": {"a": 5, "b": 3},  # tools_call
    "valid_tool": {"region": "us-west1"},  # http-invalid-tool-headers
    "json_schema_2020_12_tool": {  # json-schema-2020-12-preservation
        "name": "Ada",
        "contactMethod": "email",
        "email": "ada@example.com",
    },
}
# json-schema-2020-12-preservation's echo tool is handed, as its ``schema``, the other tool's
# input schema as ankka offers it to the model (so what the suite compares is what a model sees).
ECHOES = {"json_schema_echo": "json_schema_2020_12_tool"}

log = logging.getLogger("conformance-client")


def settings_for(scenario: str, url: str, context: dict[str, Any]) -> dict[str, str]:
    """The ``ANKKA_MCP_CONFORMANCE_*`` settings an operator would give for this scenario."""
    env = {f"{PREFIX}URL": url, f"{PREFIX}TIMEOUT": "20"}
    if not scenario.startswith("auth/"):
        return env
    if scenario.startswith("auth/client-credentials"):
        env[f"{PREFIX}OAUTH"] = "client_credentials"
        env[f"{PREFIX}OAUTH_CLIENT_ID"] = context["client_id"]
        if "private_key_pem" in context:
            env[f"{PREFIX}OAUTH_PRIVATE_KEY"] = context["private_key_pem"]
            env[f"{PREFIX}OAUTH_SIGNING_ALGORITHM"] = context.get("signing_algorithm", "ES256")
        else:
            env[f"{PREFIX}OAUTH_CLIENT_SECRET"] = context["client_secret"]
        return env
    if "valid_jwt" in context:  # workload identity: the workload's JWT is the grant
        env[f"{PREFIX}OAUTH"] = "workload_identity"
        env[f"{PREFIX}OAUTH_CLIENT_ID"] = context["client_id"]
        env[f"{PREFIX}OAUTH_ASSERTION"] = context["valid_jwt"]
        return env
    if "idp_id_token" in context:
        env[f"{PREFIX}OAUTH"] = "identity_assertion"
        env[f"{PREFIX}OAUTH_CLIENT_ID"] = context["client_id"]
        env[f"{PREFIX}OAUTH_CLIENT_SECRET"] = context["client_secret"]
        env[f"{PREFIX}OAUTH_IDP_TOKEN_ENDPOINT"] = context["idp_token_endpoint"]
        env[f"{PREFIX}OAUTH_IDP_CLIENT_ID"] = context["idp_client_id"]
        env[f"{PREFIX}OAUTH_ID_TOKEN"] = context["idp_id_token"]
        return env
    env[f"{PREFIX}OAUTH"] = "consent"
    env[f"{PREFIX}OAUTH_CLIENT_METADATA_URL"] = CLIENT_METADATA_URL
    if "client_id" in context:  # pre-registration
        env[f"{PREFIX}OAUTH_CLIENT_ID"] = context["client_id"]
        if "client_secret" in context:
            env[f"{PREFIX}OAUTH_CLIENT_SECRET"] = context["client_secret"]
    return env


async def authorization_server_of(url: str) -> str:
    """The operator's step for a client with credentials of its own: which authorization server
    the resource names in its protected-resource metadata (RFC 9728)."""
    parts = urlsplit(url)
    metadata = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}"
    async with httpx2.AsyncClient(timeout=10.0) as client:
        response = await client.get(metadata)
        response.raise_for_status()
    servers = response.json().get("authorization_servers") or []
    if not servers:
        raise SystemExit(f"{metadata} names no authorization server")
    return str(servers[0])


def browser(servers: McpServers) -> None:
    """Answer each consent like a person's browser would, against the suite's servers."""
    tasks: set[asyncio.Task[None]] = set()

    async def visit(pending: PendingConsent) -> None:
        async with httpx2.AsyncClient(timeout=10.0, follow_redirects=False) as client:
            response = await client.get(pending.url)
        location = response.headers.get("location", "")
        query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
        log.info("the authorization server answered %s", response.status_code)
        servers.consent.complete(
            state=query.get("state", pending.state),
            code=query.get("code"),
            iss=query.get("iss"),
            error=query.get("error") or (None if "code" in query else "no redirect with a code"),
        )

    def on_request(pending: PendingConsent) -> None:
        task = asyncio.get_running_loop().create_task(visit(pending))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    servers.consent.on_request = on_request


async def person_accepts_defaults(
    context: ClientRequestContext, params: ElicitRequestParams
) -> ElicitResult | ErrorData:
    if not isinstance(params, ElicitRequestFormParams):
        return ElicitResult(action="decline")
    return ElicitResult(action="accept", content=accepted(params.requested_schema, {}))


async def run(url: str, scenario: str, context: dict[str, Any]) -> int:
    env = settings_for(scenario, url, context)
    if env.get(f"{PREFIX}OAUTH") in (
        "identity_assertion",
        "client_credentials",
        "workload_identity",
    ):
        env[f"{PREFIX}OAUTH_ISSUER"] = await authorization_server_of(url)
    settings = parse_environment(env, [SERVER])
    options = {"elicitation": person_accepts_defaults}
    servers = McpServers(settings, start_wait=25, connection_options=options)
    browser(servers)
    async with servers:
        listed = await servers.tools_for([SERVER], agent="conformance", turn="t1")
        log.info("tools: %s", [t.tool for t in listed.tools])
        failed = 0
        for name, arguments in calls(listed.tools, context):
            tool = next((t for t in listed.tools if t.tool == name), None)
            if tool is None:
                log.error("%s is not among the tools offered", name)
                failed += 1
                continue
            outcome = await tool.run(json.dumps(arguments))
            log.info(
                "%s -> %s%s", tool.tool, "error: " if outcome.is_error else "", outcome.content
            )
            failed += outcome.is_error
    return 1 if failed else 0


def calls(tools: Sequence[McpTool], context: dict[str, Any]) -> list[tuple[str, Any]]:
    """The calls to make: the scenario's own, else each tool with its arguments."""
    named = context.get("toolCalls")
    if isinstance(named, list):
        return [(str(c.get("name")), c.get("arguments") or {}) for c in named]
    offered = {t.tool: t.spec.parameters for t in tools}
    planned: list[tuple[str, Any]] = []
    for tool in tools:
        echoed = ECHOES.get(tool.tool)
        if echoed is not None:
            planned.append((tool.tool, {"schema": offered.get(echoed, {})}))
        elif tool.tool in ARGUMENTS or not tool.spec.parameters.get("required"):
            planned.append((tool.tool, ARGUMENTS.get(tool.tool, {})))
        else:
            log.info("%s takes arguments this client has none for: listed, not called", tool.tool)
    return planned


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    try:
        return asyncio.run(run(sys.argv[1], scenario, context))
    except Exception as exc:  # the suite reads the exit code; say why on stderr
        log.error("%s: %s", type(exc).__name__, exc)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
