"""No MCP secret in a log line, whoever writes it (ankka, the SDK, its HTTP client).

The SDK logs what goes wrong in an OAuth flow with the exception, and an authorization server's
error body may quote what it was sent (a client secret, a token). :class:`SecretsFilter`, put on
the loggers of the SDK and its HTTP client by :class:`~.servers.McpServers` while it runs,
renders each record (message, arguments, traceback) and replaces every secret the servers hold
now (configured values and the tokens obtained so far) with ``***`` before any handler sees it.
The SDK's report of an answer cut at the size limit (:mod:`.bounded`) is a warning of one line,
not a traceback: the cut is expected, and the call says so as a tool error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from ankka.runtime.features.mcp.bounded import cut_off
from ankka.runtime.features.mcp.results import redact

__all__ = ["SecretsFilter", "watched_loggers"]

PREFIXES = ("mcp", "httpx2", "ankka.runtime.mcp")


class SecretsFilter(logging.Filter):
    def __init__(self, secrets: Callable[[], Iterable[str]]) -> None:
        super().__init__()
        self._secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and cut_off(record.exc_info[1]):
            record.msg, record.args = f"{record.getMessage()}: {record.exc_info[1]}", None
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        secrets = sorted({s for s in self._secrets() if s}, key=len, reverse=True)
        if not secrets:
            return True
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:
            message += "\n" + record.exc_text
        record.msg, record.args, record.exc_text = redact(message, secrets), None, None
        return True


def watched_loggers() -> list[logging.Logger]:
    """The loggers that may carry a server's words: ankka's MCP one, the SDK's and httpx2's
    (every one that exists now; the SDK makes its loggers when its modules are imported)."""
    names = [
        name
        for name in list(logging.Logger.manager.loggerDict)
        if any(name == p or name.startswith(p + ".") for p in PREFIXES)
    ]
    return [logging.getLogger(name) for name in sorted({*names, *PREFIXES})]
