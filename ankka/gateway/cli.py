"""Run the checked model gateway: one OpenAI-compatible address for the installation models.

It serves POST /v1/chat/completions (plain and streaming), GET /v1/models, Ollama's
POST /api/show, /healthz, /readyz and /metrics. It refuses, before anything is sent, a request
the model cannot serve (tools, a reasoning effort or images the model lacks). The models file
(YAML) lists each model's name, kind (ollama, llamacpp, openai) and url; it is re-read when it
changes. With --tls-dir it requires client certificates from the platform CA (files tls.crt,
tls.key and ca.crt, reloaded when they change); --insecure serves plain HTTP for a laptop.
The line "ankka gateway: listening on http(s)://HOST:PORT" says where it serves. With
--health-port, /healthz, /readyz and /metrics are also served over plain HTTP on that port,
for kubelet probes and Prometheus (they have no client certificate). Every option can also be
set as ANKKA_GATEWAY_<OPTION> (e.g. ANKKA_GATEWAY_MODELS_FILE), as the Helm chart does; the
ports are ANKKA_GATEWAY_LISTEN_PORT and ANKKA_GATEWAY_LISTEN_HEALTH_PORT, because Kubernetes
sets ANKKA_GATEWAY_PORT=tcp://IP:PORT in pods of a namespace with a Service named
ankka-gateway (service links). The older ANKKA_GATEWAY_PORT and ANKKA_GATEWAY_HEALTH_PORT are
still read when they hold a plain number; a service-link value there is ignored.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys

from ankka._kernel import serve
from ankka._kernel.errors import AnkkaError, ConfigurationError
from ankka._kernel.logs import say

__all__ = ["configure", "run"]


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def _port_env(name: str, legacy: str, default: int) -> int:
    """A port from ``name``, else from the older ``legacy`` name when it holds a number.

    The older names can be Kubernetes service-link variables (``tcp://10.0.0.7:8443``) in a
    pod whose namespace has a Service named ``ankka-gateway``: such a value is not a setting.
    Read in ``run`` only, so no other subcommand of ``ankka`` ever trips over them.
    """
    raw = _env(name)
    if raw is None:
        old = _env(legacy)
        if old is None or "://" in old:
            return default
        name, raw = legacy, old
    try:
        return int(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not a port number") from None


def configure(parser: argparse.ArgumentParser) -> None:
    # Each option can come from ANKKA_GATEWAY_<OPTION>, which is how the Helm chart sets them.
    parser.add_argument(
        "--models",
        metavar="FILE",
        default=_env("ANKKA_GATEWAY_MODELS_FILE"),
        help="the models file (YAML); env ANKKA_GATEWAY_MODELS_FILE",
    )
    parser.add_argument(
        "--tls-dir",
        metavar="DIR",
        default=_env("ANKKA_GATEWAY_TLS_DIR"),
        help="serve mTLS with DIR/tls.crt, DIR/tls.key and DIR/ca.crt (reloaded on change); "
        "env ANKKA_GATEWAY_TLS_DIR",
    )
    parser.add_argument(
        "--insecure", action="store_true", help="serve plain HTTP with no caller identity"
    )
    parser.add_argument(
        "--host",
        default=_env("ANKKA_GATEWAY_HOST"),
        help="address to listen on; default 0.0.0.0 with --tls-dir (the cluster), "
        "127.0.0.1 with --insecure (a laptop); env ANKKA_GATEWAY_HOST",
    )
    parser.add_argument(
        "--port",
        type=serve.port_number,
        help="port; 0 picks a free one (default 8443); env ANKKA_GATEWAY_LISTEN_PORT",
    )
    parser.add_argument(
        "--health-port",
        type=serve.port_number,
        metavar="PORT",
        help="also answer /healthz, /readyz and /metrics over plain HTTP on PORT, for kubelet "
        "probes and Prometheus, which have no client certificate (off by default; 0 picks a "
        "free port); env ANKKA_GATEWAY_LISTEN_HEALTH_PORT",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=16 * 1024 * 1024,
        help="largest request body accepted; larger ones get 413 (%(default)s)",
    )
    serve.add_limit_options(parser, env_prefix="ANKKA_GATEWAY_")
    serve.add_probe_budget(
        parser, "--health-max-connections", env="ANKKA_GATEWAY_HEALTH_MAX_CONNECTIONS"
    )
    parser.add_argument(
        "--server",
        choices=("raw", "uvicorn"),
        default=_env("ANKKA_GATEWAY_SERVER") or "raw",
        help="the HTTP server: the gateway's own (raw: httptools on an asyncio protocol) or "
        "uvicorn's (%(default)s); env ANKKA_GATEWAY_SERVER",
    )
    parser.add_argument(
        "--tls-reload-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="how often the TLS files are checked for change (%(default)s)",
    )


def _refuse(message: str) -> int:
    say(f"ankka gateway: {message}", stream=sys.stderr, level="ERROR")
    return 2


def run(args: argparse.Namespace) -> int:
    from ankka._kernel import tracing
    from ankka._kernel.health import HealthPort
    from ankka._kernel.tls import ReloadingServerTLS
    from ankka.gateway.app import ROUTES, Gateway
    from ankka.gateway.models_file import ModelsFile
    from ankka.gateway.server import serve_raw

    try:
        port = (
            args.port
            if args.port is not None
            else _port_env("ANKKA_GATEWAY_LISTEN_PORT", "ANKKA_GATEWAY_PORT", 8443)
        )
        health_port = (
            args.health_port
            if args.health_port is not None
            else _port_env("ANKKA_GATEWAY_LISTEN_HEALTH_PORT", "ANKKA_GATEWAY_HEALTH_PORT", -1)
        )
    except ConfigurationError as exc:
        return _refuse(str(exc))
    if args.server not in ("raw", "uvicorn"):
        return _refuse(f"ANKKA_GATEWAY_SERVER={args.server!r}: choose raw or uvicorn")
    if not args.models:
        return _refuse("no models file: pass --models FILE (or set ANKKA_GATEWAY_MODELS_FILE)")
    if bool(args.tls_dir) == bool(args.insecure):
        return _refuse(
            "choose --tls-dir DIR (mTLS, for the cluster) or --insecure (plain HTTP, a laptop)"
        )
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # a line per request costs time
    models_file = ModelsFile(args.models)
    try:
        models = models_file.load()
        tls = (
            ReloadingServerTLS(args.tls_dir, interval_s=args.tls_reload_interval)
            if args.tls_dir
            else None
        )
        traces = tracing.from_environment("ankka-gateway")
    except AnkkaError as exc:  # a bad models file, TLS directory or tracing setting
        return _refuse(str(exc))
    limits = serve.limits_from(args)
    host = args.host or ("0.0.0.0" if tls is not None else "127.0.0.1")
    sock = serve.bind(host, port)
    health_sock = serve.bind(host, health_port) if health_port >= 0 else None

    async def main() -> int:
        gateway = Gateway(
            models,
            models_file=models_file,
            max_body=args.max_body_bytes,
            tracer=traces.tracer if traces is not None else None,
        )
        # One SERVER span per request, continuing the caller's traceparent, when tracing is on.
        app = (
            gateway
            if traces is None
            else tracing.ServerSpans(gateway, traces.tracer, routes=ROUTES)
        )
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(gateway)
            if health_sock is not None:
                await stack.enter_async_context(
                    HealthPort(
                        health_sock,
                        gateway.operations,
                        limits=serve.probe_limits(limits, args.health_max_connections),
                    )
                )
                shown, port = health_sock.getsockname()[:2]
                say(f"ankka gateway: health on http://{shown}:{port}")
            if tls is not None:
                await stack.enter_async_context(tls)
            context = tls.context if tls is not None else None
            if args.server == "raw":
                await serve_raw(
                    app,
                    sock,
                    name="ankka gateway",
                    limits=limits,
                    max_body=args.max_body_bytes,
                    ssl_context=context,
                )
            else:
                await serve.serve_forever(
                    app,
                    sock,
                    name="ankka gateway",
                    ssl_context=context,
                    proxy_headers=False,  # callers are known by certificate, not by headers
                    limits=limits,
                )
        return 0

    try:
        return serve.run(main)
    finally:
        if traces is not None:
            traces.shutdown()  # what is still buffered is exported before the process ends
