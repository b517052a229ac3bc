"""A person's consent for an MCP server's OAuth flow (``ANKKA_MCP_<SERVER>_OAUTH=consent``).

The SDK's authorization code flow asks two things of its caller: send the person to the
authorization URL (``redirect_handler``) and hand back the code the authorization server sent
the person back with (``callback_handler``). In a runtime nobody sits at a browser, so the
:class:`ConsentDesk` keeps the URL as a pending consent (the console's MCP page shows it as a
link; ``/readyz`` names the server as waiting for it), and the runtime's
``GET /v1/mcp/oauth/callback?code&state`` route completes it by ``state``: the one value only
that authorization request carries. A consent is completed at most once; one nobody completes
within :data:`CONSENT_TIMEOUT` seconds fails that connection attempt (the next attempt asks
again). The URL carries no secret (PKCE keeps the verifier here), but it is shown only on the
console, never logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from mcp.shared.auth import AuthorizationCodeResult

from ankka._kernel.errors import NotFound, RequestError

__all__ = ["CONSENT_TIMEOUT", "ConsentDesk", "PendingConsent"]

log = logging.getLogger("ankka.runtime.mcp")

CONSENT_TIMEOUT = 900.0
MAX_PENDING = 64


@dataclass(eq=False)
class PendingConsent:
    server: str
    url: str
    state: str
    answer: asyncio.Future[AuthorizationCodeResult] = field(repr=False)


class ConsentDesk:
    def __init__(
        self,
        *,
        timeout: float = CONSENT_TIMEOUT,
        on_request: Callable[[PendingConsent], None] | None = None,
    ) -> None:
        self._timeout = timeout
        self._by_state: dict[str, PendingConsent] = {}
        self._by_server: dict[str, PendingConsent] = {}
        self.on_request = on_request
        """Told of each new consent (the conformance client answers it like a browser)."""

    def pending(self) -> list[PendingConsent]:
        return sorted(self._by_server.values(), key=lambda p: p.server)

    def waiting(self, server: str) -> bool:
        return server in self._by_server

    def handlers(
        self, server: str
    ) -> tuple[Callable[[str], Awaitable[None]], Callable[[], Awaitable[AuthorizationCodeResult]]]:
        """The SDK's redirect and callback handlers for one server."""

        async def redirect(url: str) -> None:
            state = (parse_qs(urlsplit(url).query).get("state") or [""])[0]
            if not state:
                raise RequestError("the authorization URL carries no state")
            self._drop(server)
            if len(self._by_state) >= MAX_PENDING:
                raise RequestError(f"more than {MAX_PENDING} consents are waiting")
            future: asyncio.Future[AuthorizationCodeResult] = (
                asyncio.get_running_loop().create_future()
            )
            pending = PendingConsent(server, url, state, future)
            self._by_state[state] = pending
            self._by_server[server] = pending
            log.warning(
                "MCP server %r needs a person's consent: open the console's MCP page "
                "(/console/mcp) and follow its link",
                server,
            )
            if self.on_request is not None:
                self.on_request(pending)

        async def callback() -> AuthorizationCodeResult:
            pending = self._by_server.get(server)
            if pending is None:
                raise RequestError(f"no consent is waiting for MCP server {server!r}")
            try:
                async with asyncio.timeout(self._timeout):
                    return await asyncio.shield(pending.answer)
            except TimeoutError:
                raise RequestError(
                    f"nobody consented for MCP server {server!r} within {self._timeout:g}s"
                ) from None
            finally:
                self._drop(server)

        return redirect, callback

    def complete(
        self, *, state: str, code: str | None, iss: str | None = None, error: str | None = None
    ) -> str:
        """Hand the authorization server's answer to the flow waiting for it; the server's name.
        A state no consent waits for (unknown, or answered already) is :class:`NotFound`."""
        pending = self._by_state.get(state)
        if pending is None or pending.answer.done():
            raise NotFound("no consent waits for this state (it was answered, or it expired)")
        if error is not None or not code:
            pending.answer.set_exception(
                RequestError(f"the authorization server refused: {(error or 'no code')[:200]}")
            )
        else:
            pending.answer.set_result(AuthorizationCodeResult(code=code, state=state, iss=iss))
        return pending.server

    def _drop(self, server: str) -> None:
        old = self._by_server.pop(server, None)
        if old is not None:
            self._by_state.pop(old.state, None)
            if not old.answer.done():
                old.answer.cancel()
