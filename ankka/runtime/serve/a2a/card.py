"""Agent cards: what each agent says of itself to A2A clients. Pure.

One card per agent, at ``{base}/.well-known/agent-card.json`` with ``base`` =
``{public address}/a2a/{agent}``. The public address is the runtime's configured one
(``ankka serve --public-url``), else the scheme and ``Host`` of the request that asked: never
the address the server is bound to (``0.0.0.0`` means nothing to a caller). The card's
security schemes are how this runtime identifies callers (docs/security.md): client
certificates (mTLS), bearer tokens (a token file or Kubernetes service-account tokens), or
none on loopback, where every caller is trusted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from a2a.types import a2a_pb2 as pb
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol

from ankka._kernel.errors import RequestError
from ankka.runtime.serve.a2a.port import AgentInfo

__all__ = ["CardSettings", "agent_card", "base_url"]

_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]{1,253})(:[0-9]{1,5})?$")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # at a card's first answer

    try:
        return version("ankka")
    except PackageNotFoundError:
        return "0"


@dataclass(frozen=True, slots=True)
class CardSettings:
    """How the cards describe this runtime: where callers reach it and how they identify.

    ``public_url``: the address callers use (scheme, host, port, and any path prefix a proxy
    adds), or None to take it from each request. ``mtls``/``bearer``: the schemes callers
    are identified by; ``bearer_format`` names the token kind (e.g. ``kubernetes``)."""

    public_url: str | None = None
    tls: bool = False
    mtls: bool = False
    bearer: bool = False
    bearer_format: str = ""
    push: bool = True


def base_url(settings: CardSettings, *, scheme: str, host: str | None, agent: str) -> str:
    """The agent's base URL: the configured public address, else the request's own."""
    if settings.public_url is not None:
        root = settings.public_url.rstrip("/")
    else:
        if host is None or not _HOST.match(host):
            raise RequestError(
                "the request has no usable Host header, so no card URL can be built: send "
                "Host, or start ankka serve with --public-url"
            )
        root = f"{'https' if settings.tls else scheme}://{host}"
    return f"{root}/a2a/{agent}"


def _skills(agent: AgentInfo) -> list[pb.AgentSkill]:
    if agent.kind == "request":
        return [
            pb.AgentSkill(
                id=agent.name,
                name=agent.name,
                description=agent.description,
                tags=["ankka", "request"],
                input_modes=["text/plain", "application/json"],
                output_modes=["text/plain", "application/json"],
            )
        ]
    return [
        pb.AgentSkill(
            id=name,
            name=name,
            description=(
                f"{description or name} Send the instructions as the message's text; "
                f'name the type in the message metadata ("taskType": "{name}") when the agent '
                "accepts more than one. The result is a JSON data part."
            ),
            tags=["ankka", "task", name],
            input_modes=["text/plain", "application/json"],
            output_modes=["application/json"],
        )
        for name, description, _ in agent.task_types
    ]


def _security(settings: CardSettings, card: pb.AgentCard) -> None:
    alternatives: Sequence[str] = []
    if settings.mtls:
        card.security_schemes[
            "mtls"
        ].mtls_security_scheme.description = (
            "a client certificate from the platform's CA, naming the caller by its ankka:// URI SAN"
        )
        alternatives = [*alternatives, "mtls"]
    if settings.bearer:
        scheme = card.security_schemes["bearer"].http_auth_security_scheme
        scheme.scheme = "Bearer"
        scheme.bearer_format = settings.bearer_format
        scheme.description = "a bearer token this runtime knows (docs/security.md)"
        alternatives = [*alternatives, "bearer"]
    for name in alternatives:
        requirement = card.security_requirements.add()
        requirement.schemes[name].CopyFrom(pb.StringList())


def agent_card(agent: AgentInfo, settings: CardSettings, base: str) -> pb.AgentCard:
    """The card of ``agent`` served at ``base``: both bindings at the base URL (JSON-RPC posts
    to it, HTTP+JSON adds its paths under it), protocol 1.0."""
    card = pb.AgentCard(
        name=agent.name,
        description=agent.description,
        version=_version(),
        supported_interfaces=[
            pb.AgentInterface(
                url=base,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_1_0,
            ),
            pb.AgentInterface(
                url=base,
                protocol_binding=TransportProtocol.HTTP_JSON.value,
                protocol_version=PROTOCOL_VERSION_1_0,
            ),
        ],
        capabilities=pb.AgentCapabilities(
            streaming=True, push_notifications=settings.push, extended_agent_card=False
        ),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=(
            ["text/plain", "application/json"] if agent.kind == "request" else ["application/json"]
        ),
        skills=_skills(agent),
    )
    _security(settings, card)
    return card
