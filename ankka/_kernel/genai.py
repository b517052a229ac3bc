"""The names of OpenTelemetry's GenAI semantic conventions ankka uses, in one place.

Pinned to :data:`ankka._kernel.tracing.SEMCONV_VERSION` (GenAI status: Development): span
names, attribute keys, metric names and their bucket boundaries, as that version defines them.
Shared by the gateway (its upstream ``chat`` spans and the ``gen_ai.client.*`` metrics beside
its own Prometheus names) and the runtime. Plain strings: no OpenTelemetry import.
"""

from __future__ import annotations

__all__ = [
    "AGENT_NAME",
    "CACHE_CREATION_TOKENS",
    "CACHE_READ_TOKENS",
    "CONVERSATION_ID",
    "DURATION_BUCKETS",
    "ERROR_TYPE",
    "INPUT_MESSAGES",
    "INPUT_TOKENS",
    "JSONRPC_REQUEST_ID",
    "MCP_METHOD_NAME",
    "MCP_PROTOCOL_VERSION",
    "MCP_SESSION_ID",
    "NETWORK_PROTOCOL_NAME",
    "NETWORK_TRANSPORT",
    "OPERATION_DURATION",
    "OPERATION_NAME",
    "OUTPUT_MESSAGES",
    "OUTPUT_TOKENS",
    "OUTPUT_TYPE",
    "PROVIDER_NAME",
    "REQUEST_MAX_TOKENS",
    "REQUEST_MODEL",
    "REQUEST_STREAM",
    "RESPONSE_FINISH_REASONS",
    "RESPONSE_MODEL",
    "RPC_RESPONSE_STATUS_CODE",
    "SERVER_ADDRESS",
    "SERVER_PORT",
    "SYSTEM_INSTRUCTIONS",
    "TOKEN_BUCKETS",
    "TOKEN_TYPE",
    "TOKEN_USAGE",
    "TOOL_CALL_ARGUMENTS",
    "TOOL_CALL_ID",
    "TOOL_CALL_RESULT",
    "TOOL_DESCRIPTION",
    "TOOL_NAME",
    "TOOL_TYPE",
    "chat_span_name",
    "invoke_agent_span_name",
    "execute_tool_span_name",
    "prometheus_label",
]

OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_STREAM = "gen_ai.request.stream"
TOKEN_TYPE = "gen_ai.token.type"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"

# Agents, inference and tools (gen-ai-agent-spans.md, gen-ai-spans.md).
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
OUTPUT_TYPE = "gen_ai.output.type"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
"""``function`` (a function of the service's), ``extension`` (an MCP server's tool)."""
TOOL_DESCRIPTION = "gen_ai.tool.description"
# Opt-in content (recorded only when OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT asks).
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
# MCP (mcp.md): added to the execute_tool span of an MCP server's tool (the conventions say
# not to make a second span when the tool's execution is traced already).
MCP_METHOD_NAME = "mcp.method.name"
JSONRPC_REQUEST_ID = "jsonrpc.request.id"
"""The ``id`` of the JSON-RPC request, as a string (the MCP SDK's own, folded in)."""
MCP_SESSION_ID = "mcp.session.id"
MCP_PROTOCOL_VERSION = "mcp.protocol.version"
NETWORK_TRANSPORT = "network.transport"
NETWORK_PROTOCOL_NAME = "network.protocol.name"
RPC_RESPONSE_STATUS_CODE = "rpc.response.status_code"
"""The JSON-RPC error's code, when an MCP server answered a call with one."""

TOKEN_USAGE = "gen_ai.client.token.usage"
"""Histogram of tokens per operation and token type (``input``, ``output``), unit ``{token}``."""
OPERATION_DURATION = "gen_ai.client.operation.duration"
"""Histogram of an operation's seconds, ``error.type`` set when it failed."""

# The boundaries the conventions say these two histograms SHOULD have.
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                 16777216, 67108864)  # fmt: skip
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                    40.96, 81.92)  # fmt: skip


def chat_span_name(model: str) -> str:
    """An inference span's name: ``{gen_ai.operation.name} {gen_ai.request.model}``."""
    return f"chat {model}"


def invoke_agent_span_name(agent: str) -> str:
    """An agent invocation's span name: ``invoke_agent {gen_ai.agent.name}``."""
    return f"invoke_agent {agent}"


def execute_tool_span_name(tool: str) -> str:
    """A tool execution's span name: ``execute_tool {gen_ai.tool.name}``."""
    return f"execute_tool {tool}"


def prometheus_label(key: str) -> str:
    """An attribute key as a Prometheus label name (dots become underscores), as
    OpenTelemetry's Prometheus exporters write it."""
    return key.replace(".", "_")
