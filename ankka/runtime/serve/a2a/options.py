"""``ankka serve``'s A2A options, and the A2A layer they configure (docs/a2a.md)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from ankka.runtime.serve.identity import is_loopback

if TYPE_CHECKING:
    from ankka.runtime.drivers.request import Runtime
    from ankka.runtime.drivers.tasks.host import TaskHost
    from ankka.runtime.serve.a2a.service import A2AService

__all__ = ["SDK_SCOPE", "add_options", "from_options"]

SDK_SCOPE = "a2a-python-sdk"
"""The a2a-sdk's tracer: a traced runtime makes none of its spans (one per method of its request
dispatcher); the runtime's SERVER span of each A2A request stands for that work."""


def add_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("A2A (docs/a2a.md)")
    group.add_argument(
        "--public-url",
        metavar="URL",
        default=os.environ.get("ANKKA_PUBLIC_URL") or None,
        help="the address callers reach this runtime at (env ANKKA_PUBLIC_URL), for the URLs "
        "in its A2A agent cards; default: the scheme and Host of each request",
    )
    group.add_argument(
        "--a2a-default",
        metavar="AGENT",
        default=None,
        help="the agent whose card is also served at /.well-known/agent-card.json (default: "
        "the only agent, when there is one)",
    )
    group.add_argument(
        "--a2a-push",
        choices=["on", "off"],
        default="on",
        help="A2A push notifications to callers' webhooks (%(default)s)",
    )
    group.add_argument(
        "--a2a-push-private",
        choices=["on", "off"],
        default=None,
        help="allow webhooks at loopback and private addresses (default: on when listening on "
        "loopback, else off)",
    )


def from_options(
    args: argparse.Namespace, runtime: Runtime, tasks: TaskHost, *, bearer_format: str | None
) -> A2AService:
    """The A2A layer: its cards say how this runtime identifies callers (``bearer_format``
    None: no bearer tokens; else the kind of token)."""
    from ankka.runtime.serve.a2a.card import CardSettings
    from ankka.runtime.serve.a2a.port import RuntimePort
    from ankka.runtime.serve.a2a.service import A2AService

    settings = CardSettings(
        public_url=args.public_url,
        tls=bool(args.tls_dir),
        mtls=bool(args.tls_dir),
        bearer=bearer_format is not None,
        bearer_format=bearer_format or "",
        push=args.a2a_push == "on",
    )
    private = args.a2a_push_private
    allow = is_loopback(args.host) if private is None else private == "on"
    return A2AService(
        RuntimePort(runtime, tasks),
        settings=settings,
        default_agent=args.a2a_default,
        allow_private_webhooks=allow,
    )
