"""Serve a service's agents over HTTP.

MODULE:ATTR names the Service, for example examples.weather:service; a bare MODULE means
MODULE:service. The current directory is importable. Models come from ANKKA_MODEL_<NAME>_*
variables (see docs/configuration.md); the session store defaults to an SQLite file in the
working directory. The first line printed is
"ankka serve: listening on http://HOST:PORT".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from ankka._kernel import serve, tracing
from ankka._kernel.drain import Drain
from ankka._kernel.errors import AnkkaError, ConfigurationError
from ankka._kernel.logs import say
from ankka.runtime.declare.policy import load_policy
from ankka.runtime.engine.lru import DEFAULT_CACHE_BYTES
from ankka.runtime.features import mcp as mcp_feature
from ankka.runtime.serve.a2a import options as a2a_options
from ankka.runtime.serve.hosts import ALLOWED_HOSTS_VARIABLE, allowed_hosts
from ankka.runtime.serve.identity import Identify, is_loopback, load_tokens
from ankka.runtime.serve.target import load_service

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ankka._kernel.health import HealthPort
    from ankka._kernel.tls import ReloadingServerTLS
    from ankka.runtime.drivers.request import Runtime
    from ankka.runtime.engine.spans import EngineSpans
    from ankka.runtime.serve.tokenreview import TokenReviewer

__all__ = ["CONSOLE_VARIABLE", "STORE_VARIABLE", "configure", "run"]

CONSOLE_VARIABLE = "ANKKA_CONSOLE"
STORE_VARIABLE = "ANKKA_STORE"  # the operator renders it, from a Secret for PostgreSQL


def configure(parser: argparse.ArgumentParser) -> None:
    from ankka.runtime.store.open import DEFAULT_STORE

    parser.add_argument(
        "target", metavar="MODULE[:ATTR]", help="the Service to serve (ATTR defaults to service)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (%(default)s)")
    parser.add_argument(
        "--port", type=serve.port_number, default=8000, help="port; 0 picks a free one"
    )
    parser.add_argument(
        "--store",
        default=os.environ.get(STORE_VARIABLE) or DEFAULT_STORE,
        help="session store: sqlite:///PATH or postgresql://USER@HOST/DB (env ANKKA_STORE, "
        "which keeps a password out of the command line; postgresql:// alone takes libpq's "
        "PGHOST, PGUSER, PGPASSWORD ...; default: sqlite:///ankka.sqlite3)",
    )
    parser.add_argument("--access-log", action="store_true", help="log every request")
    parser.add_argument(
        "--allowed-host",
        metavar="NAME",
        action="append",
        default=[n for n in os.environ.get(ALLOWED_HOSTS_VARIABLE, "").split(",") if n.strip()],
        help="a name callers send in Host besides addresses, localhost and Service names "
        "(repeatable; env ANKKA_ALLOWED_HOSTS, comma-separated); a request to any other name "
        "is refused 421, so a web page cannot reach this runtime by DNS rebinding",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=1024 * 1024,
        help="largest request body accepted; larger ones get 413 (%(default)s)",
    )
    parser.add_argument(
        "--tls-dir",
        metavar="DIR",
        help="serve mTLS with DIR/tls.crt, DIR/tls.key and DIR/ca.crt (reloaded on change): "
        "callers present a client certificate from that CA and are known by its ankka:// URI SAN "
        "(with --token-file or --token-review-url too, a caller without one sends a token)",
    )
    parser.add_argument(
        "--probe-port",
        type=serve.port_number,
        default=None,
        metavar="PORT",
        help="also answer /healthz and /readyz (only) over plain HTTP on PORT, for kubelet's "
        "probes, which have no client certificate (off by default; 0 picks a free one)",
    )
    serve.add_probe_budget(parser, "--probe-max-connections")
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help="callers send Authorization: Bearer TOKEN; FILE has one 'CALLER TOKEN' per line",
    )
    review = parser.add_argument_group("Kubernetes service-account tokens (TokenReview)")
    review.add_argument(
        "--token-review-url",
        metavar="URL",
        default=os.environ.get("ANKKA_TOKEN_REVIEW_URL") or None,
        help="check bearer tokens with the TokenReview API of the Kubernetes API server at URL "
        "(env ANKKA_TOKEN_REVIEW_URL); callers are system:serviceaccount:<ns>:<name>",
    )
    review.add_argument(
        "--token-review-audience",
        metavar="AUDIENCE",
        default=os.environ.get("ANKKA_TOKEN_REVIEW_AUDIENCE") or None,
        help="accept only tokens issued for AUDIENCE (env ANKKA_TOKEN_REVIEW_AUDIENCE)",
    )
    review.add_argument(
        "--token-review-credential",
        metavar="FILE",
        default=None,
        help="this runtime's own token for the API server (default: the pod's service-account "
        "token, /var/run/secrets/kubernetes.io/serviceaccount/token, re-read per review)",
    )
    review.add_argument(
        "--token-review-ca",
        metavar="FILE",
        default=None,
        help="the CA the API server's certificate is checked with (default: the pod's "
        "service-account ca.crt)",
    )
    review.add_argument(
        "--token-review-cache-seconds",
        metavar="S",
        type=float,
        default=60.0,
        help="how long an accepted token's verdict is kept, never past the exp it claims "
        "(%(default)s; a revoked token is accepted that long after revocation)",
    )
    parser.add_argument(
        "--trust-network",
        action="store_true",
        help="on a non-loopback address, serve without identifying callers (every caller is "
        "'local'); only where the network itself admits only trusted callers",
    )
    parser.add_argument(
        "--lease-seconds",
        type=float,
        default=10.0,
        help="on PostgreSQL, how long a process that died keeps its instances before another "
        "takes them over (%(default)s)",
    )
    parser.add_argument(
        "--max-instances",
        type=int,
        default=100,
        help="the most autonomous-agent instances this process runs at once (%(default)s)",
    )
    parser.add_argument(
        "--approver-header",
        default=os.environ.get("ANKKA_APPROVER_HEADER") or None,
        metavar="NAME",
        help="the header a trusted proxy sets to name who decides an approval "
        "(env ANKKA_APPROVER_HEADER); with --tls-dir the client certificate's URI SAN wins",
    )
    parser.add_argument(
        "--approval-notice-seconds",
        type=float,
        default=300.0,
        help="how long before an approval's limit approval_expiring is sent (%(default)s)",
    )
    parser.add_argument(
        "--notification-buffer",
        type=int,
        default=256,
        help="events kept for each notification subscriber that reads slowly (%(default)s)",
    )
    parser.add_argument(
        "--console",
        choices=["on", "off"],
        default=os.environ.get(CONSOLE_VARIABLE, "off").strip().lower() or "off",
        help=f"serve the console at /console, to loopback callers or checked identities, "
        f"under the session policy (default off; env {CONSOLE_VARIABLE}=on|off; `ankka up` "
        "turns it on)",
    )
    parser.add_argument(
        "--session-cache-mb",
        type=_positive_int,
        default=DEFAULT_CACHE_BYTES // 2**20,
        metavar="MB",
        help="memory the folds of recent sessions may take, an estimate (%(default)s MiB; "
        "past it the least recently used are read from the store again)",
    )
    parser.add_argument(
        "--access-file",
        metavar="FILE",
        help="the session policy (YAML or JSON: service and agents, each read/write/decide "
        "caller patterns) in place of the declared one, entry by entry; see docs/security.md",
    )
    a2a_options.add_options(parser)
    serve.add_limit_options(parser)


def _positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{raw!r}: give 1 or more")
    return value


def _reviewer(
    args: argparse.Namespace, registry: CollectorRegistry | None = None
) -> TokenReviewer | None:
    if not args.token_review_url:
        return None
    from pathlib import Path

    from ankka.runtime.serve.tokenreview import ReviewSettings, TokenReviewer

    if not args.token_review_url.startswith("https://"):
        raise ConfigurationError(
            f"--token-review-url {args.token_review_url[:80]!r}: the API server is reached "
            "over https:// only (tokens travel in the request)"
        )
    if not 0 < args.token_review_cache_seconds <= 86400:
        raise ConfigurationError(
            f"--token-review-cache-seconds {args.token_review_cache_seconds}: give seconds "
            "from more than 0 to 86400"
        )
    settings = ReviewSettings(
        url=args.token_review_url,
        audience=args.token_review_audience,
        ttl=args.token_review_cache_seconds,
    )
    if args.token_review_credential:
        settings = replace(settings, credential_file=Path(args.token_review_credential))
    if args.token_review_ca:
        settings = replace(settings, ca_file=Path(args.token_review_ca))
    return TokenReviewer(settings, registry=registry)


def _identity(
    args: argparse.Namespace, registry: CollectorRegistry | None = None
) -> tuple[Identify, ReloadingServerTLS | None, TokenReviewer | None]:
    """How callers are identified, by the rule in :mod:`ankka.runtime.serve.identity`; says so."""
    from ankka._kernel.tls import ReloadingServerTLS, TLSFilesError

    tokens = load_tokens(args.token_file) if args.token_file else None
    reviewer = _reviewer(args, registry)
    tls = None
    if args.tls_dir:
        try:
            # With tokens too, a client without a certificate finishes the handshake and
            # must send a token (the rule in ankka.runtime.serve.identity).
            optional = tokens is not None or reviewer is not None
            tls = ReloadingServerTLS(args.tls_dir, require_client=not optional)
        except TLSFilesError as exc:
            raise ConfigurationError(str(exc)) from exc
    local = is_loopback(args.host)
    if tls is None and tokens is None and reviewer is None and not local and not args.trust_network:
        raise ConfigurationError(
            f"listening on {args.host} needs a way to identify callers: pass --tls-dir DIR "
            "(client certificates), --token-file FILE (bearer tokens) or --token-review-url "
            "URL (Kubernetes service-account tokens); only a loopback "
            "address trusts its callers as 'local' (--trust-network overrides this)"
        )
    if tls is not None:
        how = f"callers are identified by client certificate (CA in {args.tls_dir}/ca.crt)"
        if not tls.require_client:
            how += ", or else by bearer token"
    elif tokens is not None:
        how = f"callers are identified by bearer token ({len(tokens)} caller(s))"
    elif reviewer is not None and not args.trust_network:
        how = "callers are identified by Kubernetes service-account token"
    elif local:
        how = "on loopback without TLS or tokens: every caller is trusted as 'local'"
    else:
        how = "WARNING: --trust-network: callers are NOT identified; every caller is 'local'"
    say(f"ankka serve: {how}", stream=sys.stderr)
    if reviewer is not None:
        audience = reviewer.settings.audience or "the API server's own"
        say(
            f"ankka serve: bearer tokens are checked with TokenReview at "
            f"{reviewer.settings.url} (audience {audience})",
            stream=sys.stderr,
        )
    # Tokens to review make an unidentified caller a 401, unless the network is trusted.
    trust = args.trust_network or reviewer is None
    identify = Identify(tls=tls is not None, tokens=tokens, trust=trust, reviewer=reviewer)
    return identify, tls, reviewer


def _probe_port(
    sock: socket.socket, runtime: Runtime, limits: serve.ConnectionLimits
) -> HealthPort:
    """The plain probe port: /healthz, and /readyz as the API answers it (503 naming a
    declared MCP server without a session). Says where it listens."""
    from ankka._kernel.health import HealthPort

    def answer(path: str) -> tuple[int, bytes, bytes]:
        missing = runtime.missing() if path == "/readyz" else []
        body = {"ok": False, "missing": missing} if missing else {"ok": True}
        return (503 if missing else 200), b"application/json", json.dumps(body).encode()

    shown, port = sock.getsockname()[:2]
    say(f"ankka serve: probes on http://{shown}:{port} (/healthz, /readyz)", stream=sys.stderr)
    return HealthPort(sock, answer, limits=limits, paths=("/healthz", "/readyz"))


def _import_http() -> None:
    """Import what serving HTTP needs (the routes, starlette, uvicorn, the A2A layer) on the
    event loop's thread, before any instance is resumed or work is handed to a thread. The
    a2a-sdk's server is not among them: its routes are built at the first A2A request, on
    this thread too (:mod:`ankka.runtime.serve.a2a.mount`)."""
    import uvicorn.protocols.http.httptools_impl  # noqa: F401

    import ankka.runtime.serve.a2a.port
    import ankka.runtime.serve.a2a.service
    import ankka.runtime.serve.http  # noqa: F401


def _engine_spans(traces: tracing.Tracing | None) -> EngineSpans | None:
    """The engine's spans when tracing is on (``invoke_agent``, ``chat``, ``execute_tool``),
    recording message content only when OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
    asks; None when it is off."""
    if traces is None:
        return None
    from ankka.runtime.engine.spans import EngineSpans

    return EngineSpans(traces.tracer, content=tracing.capture_content())


DELEGATORS_VARIABLE = "ANKKA_DELEGATORS"


def delegators_from(env: Mapping[str, str]) -> frozenset[str]:
    """Who may create a task here as another runtime's child: ``ANKKA_DELEGATORS``, callers
    (as the identity layer names them) separated by commas or spaces."""
    return frozenset(n for n in env.get(DELEGATORS_VARIABLE, "").replace(",", " ").split() if n)


def run(args: argparse.Namespace) -> int:
    from ankka.runtime.declare.compaction import from_environment
    from ankka.runtime.drivers.approvals import Timers
    from ankka.runtime.drivers.context import CompactionSetup, Context
    from ankka.runtime.drivers.request import Runtime
    from ankka.runtime.drivers.tasks.host import HostOptions, TaskHost
    from ankka.runtime.drivers.tasks.peers import check_peers, peers_from_environment
    from ankka.runtime.drivers.teams.backlog import TeamHost
    from ankka.runtime.engine.metrics import RuntimeMetrics
    from ankka.runtime.features.mcp.setup import servers_from_environment
    from ankka.runtime.providers.registry import providers_from_environment
    from ankka.runtime.providers.remote_agents import remote_agents_from_environment
    from ankka.runtime.providers.retry import TurnRetry
    from ankka.runtime.store.open import Store, sqlite_path

    if args.console not in ("on", "off"):
        say(
            f"ankka serve: {CONSOLE_VARIABLE}={args.console[:20]!r} is neither on nor off",
            stream=sys.stderr,
        )
        return 2
    metrics = RuntimeMetrics()
    try:
        traces = tracing.from_environment(
            "ankka-runtime",
            quiet=[a2a_options.SDK_SCOPE],
            folds={mcp_feature.SDK_SCOPE: mcp_feature.fold_sdk_span},
        )
        spans = _engine_spans(traces)
        service = load_service(args.target)
        sqlite_path(args.store)  # a store URL that is none is refused before anything is said
        providers = providers_from_environment(os.environ)
        mcp = servers_from_environment(service, os.environ, registry=metrics.registry)
        compaction = from_environment(os.environ)
        peers = peers_from_environment(os.environ)
        check_peers(peers, args.tls_dir)
        a2a_agents = remote_agents_from_environment(os.environ)
    except AnkkaError as exc:
        say(f"ankka serve: {exc}", stream=sys.stderr, level="ERROR")
        return 2
    limits = serve.limits_from(args)
    try:
        identify, tls, reviewer = _identity(args, metrics.registry)
        policy = service.policy()
        if args.access_file is not None:
            named = [*service.agents, *service.autonomous_agents]
            policy = load_policy(args.access_file, policy, named)
    except AnkkaError as exc:
        say(f"ankka serve: {exc}", stream=sys.stderr, level="ERROR")
        return 2
    sock = serve.bind(args.host, args.port)
    if mcp is not None:
        # Where a person's browser comes back to after an MCP server's OAuth consent.
        host = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host
        mcp.redirect_base = (
            f"{'https' if tls is not None else 'http'}://{host}:{sock.getsockname()[1]}"
        )
    probe_sock = serve.bind(args.host, args.probe_port) if args.probe_port is not None else None

    async def main() -> int:
        try:
            # One database: the journal, the task tables, the approval index and the leases.
            store = await Store.open(args.store)
        except AnkkaError as exc:
            say(f"ankka serve: {exc}", stream=sys.stderr, level="ERROR")
            return 2
        try:
            return await served(store)
        finally:
            await store.close()

    async def served(store: Store) -> int:
        context = Context.open(
            service,
            store=store.journal_store,
            providers=providers,
            metrics=metrics,
            mcp=mcp,
            compaction=CompactionSetup(override=compaction, leases=store.leases),
            approvals=store.approvals,
            policy=policy,
            cache_bytes=args.session_cache_mb * 2**20,
            # The one retry layer is the engine's: a turn's calls by this policy, a task's by
            # its driver's (providers/retry.py).
            turn_retry=TurnRetry(),
            spans=spans,
        )
        runtime = Runtime(context, timers=Timers(notice_seconds=args.approval_notice_seconds))
        tasks = TaskHost(
            context,
            store=store.tasks,
            options=HostOptions(
                lease_seconds=args.lease_seconds,
                max_instances=args.max_instances,
                notification_buffer=args.notification_buffer,
                peers=peers,
                a2a_agents=a2a_agents,
                peer_tls_dir=args.tls_dir,
                delegators=delegators_from(os.environ),
            ),
            questions=runtime.questions,
        )
        runtime.approvals.task_decided = tasks.approval_decided
        teams = TeamHost(tasks)
        names = ", ".join(f"{n} ({p.model})" for n, p in providers.items()) or "none configured"
        agents = [*service.agents, *service.autonomous_agents]
        say(f"ankka serve: agents {', '.join(agents)}; models {names}", stream=sys.stderr)
        if args.console == "on":
            say(
                "ankka serve: the console is at /console (loopback callers, or callers "
                "identified off loopback; each sees what the session policy allows)",
                stream=sys.stderr,
            )
        # The HTTP stack is imported before anything else runs, on this thread: importing it on
        # a thread while resumed instances made their first calls on the loop let the two
        # threads import httpx's modules in different orders, and Python's import-lock deadlock
        # guard then hands one of them a partially initialised module (a task failed with
        # "partially initialized module 'httpx'"). The socket is bound and listening already,
        # so a caller who connects meanwhile waits, never is refused.
        _import_http()
        async with runtime, contextlib.AsyncExitStack() as stack:
            if mcp is not None:
                # Connects every MCP server (a server that is down does not hold the start:
                # /readyz names it) and ends their sessions, in this task, at shutdown.
                await stack.enter_async_context(mcp)
            # The task host resumes every instance with work as it starts: no request
            # needed.
            await stack.enter_async_context(tasks)
            # Each team's member instances claim its backlog's items (docs/teams.md).
            await stack.enter_async_context(teams)
            if tls is not None:
                await stack.enter_async_context(tls)
            if probe_sock is not None:
                budget = serve.probe_limits(limits, args.probe_max_connections)
                await stack.enter_async_context(_probe_port(probe_sock, runtime, budget))
            if reviewer is not None:
                await stack.enter_async_context(reviewer)
            from ankka.runtime.serve.http import create_app

            tokens = "kubernetes-service-account" if reviewer is not None else "static"
            a2a = a2a_options.from_options(
                args,
                runtime,
                tasks,
                bearer_format=tokens if args.token_file or reviewer else None,
            )
            await stack.enter_async_context(a2a)
            app = create_app(
                runtime,
                tasks,
                max_body=args.max_body_bytes,
                identify=identify,
                approver_header=args.approver_header,
                console=args.console == "on",
                a2a=a2a,
                allowed_hosts=allowed_hosts(args.allowed_host, args.public_url),
                teams=teams,
                caller_share=limits.caller_share,
            )
            # At SIGTERM what is in flight is answered in the API's shape, never dropped.
            drained = Drain(
                # One SERVER span per request, continuing the caller's traceparent.
                app if traces is None else tracing.ServerSpans(app, traces.tracer),
                name="ankka serve",
            )
            await serve.serve_forever(
                drained,
                sock,
                name="ankka serve",
                access_log=args.access_log,
                limits=limits,
                ssl_context=tls.context if tls is not None else None,
                on_stop=drained.stop,
            )
        return 0

    try:
        return serve.run(main)
    finally:
        if traces is not None:
            traces.shutdown()  # what is still buffered is exported before the process ends
