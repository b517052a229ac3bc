"""The names of OpenTelemetry's GenAI semantic conventions ankka uses, in one place.

Pinned to :data:`ankka._kernel.tracing.SEMCONV_VERSION` (GenAI status: Development): span
names, attribute keys, metric names and their bucket boundaries, as that version defines them.
Shared by the gateway (its upstream ``chat`` spans and the ``gen_ai.client.*`` metrics beside
its own Prometheus names) and the runtime. Plain strings: no OpenTelemetry import.
"""

from __future__ import annotations

__all__ = [
    "DURATION_BUCKETS",
    "ERROR_TYPE",
    "INPUT_TOKENS",
    "OPERATION_DURATION",
    "OPERATION_NAME",
    "OUTPUT_TOKENS",
    "PROVIDER_NAME",
    "REQUEST_MODEL",
    "REQUEST_STREAM",
    "SERVER_ADDRESS",
    "SERVER_PORT",
    "TOKEN_BUCKETS",
    "TOKEN_TYPE",
    "TOKEN_USAGE",
    "chat_span_name",
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


def prometheus_label(key: str) -> str:
    """An attribute key as a Prometheus label name (dots become underscores), as
    OpenTelemetry's Prometheus exporters write it."""
    return key.replace(".", "_")
