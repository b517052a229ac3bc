"""The console's form token (issue 31, item 4): every state-changing form carries one.

A page with a form sets a random token in a cookie (``HttpOnly``, ``SameSite=Strict``, path
``/console``) and writes the same token into each form; a post is taken only when the two
match. Another site can post a form to the console, but it can neither read the page's token
nor set the cookie of this host, so its post is refused (403) before anything is decided. The
token needs no state on the server, so a page rendered by one replica is posted to another.
It stands beside the ``Origin`` check and the ``Host`` check (:mod:`ankka.runtime.serve.hosts`).
"""

from __future__ import annotations

import hmac
import re
import secrets

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["COOKIE", "FIELD", "form_token", "keep_token", "token_matches"]

COOKIE = "ankka_console_form"
FIELD = "form_token"
_FORM = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)


def form_token(request: Request) -> str:
    """The token of this browser (its cookie's), or a new one."""
    held = request.cookies.get(COOKIE, "")
    return held if _FORM.fullmatch(held) else secrets.token_urlsafe(32)


def keep_token(response: Response, token: str) -> Response:
    """``response``, setting the browser's token cookie to ``token``."""
    response.set_cookie(COOKIE, token, path="/console", httponly=True, samesite="strict")
    return response


def token_matches(request: Request, posted: str) -> bool:
    """Whether a posted form's token is the one this browser's cookie holds."""
    held = request.cookies.get(COOKIE, "")
    return bool(_FORM.fullmatch(held)) and hmac.compare_digest(held, posted)
