"""Run the checked model gateway: one OpenAI-compatible address for the installation models.

It serves POST /v1/chat/completions (plain and streaming), GET /v1/models, Ollama's
POST /api/show, /healthz, /readyz and /metrics. It refuses, before anything is sent, a request
the model cannot serve (tools, a reasoning effort or images the model lacks). The models file
(YAML) lists each model's name, kind (ollama, llamacpp, openai) and url; it is re-read when it
changes. With --tls-dir it requires client certificates from the platform CA (files tls.crt,
tls.key and ca.crt, reloaded when they change); --insecure serves plain HTTP for a laptop.
The first line printed is "ankka gateway: listening on http(s)://HOST:PORT".
"""

from __future__ import annotations

import argparse
import logging
import sys

from ankka._kernel import serve
from ankka._kernel.errors import AnkkaError

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--models", required=True, metavar="FILE", help="the models file (YAML)")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--tls-dir",
        metavar="DIR",
        help="serve mTLS with DIR/tls.crt, DIR/tls.key and DIR/ca.crt (reloaded on change)",
    )
    mode.add_argument(
        "--insecure", action="store_true", help="serve plain HTTP with no caller identity"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (%(default)s)")
    parser.add_argument("--port", type=int, default=8443, help="port; 0 picks a free one")
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=16 * 1024 * 1024,
        help="largest request body accepted; larger ones get 413 (%(default)s)",
    )
    parser.add_argument(
        "--tls-reload-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="how often the TLS files are checked for change (%(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    from ankka._kernel.tls import ReloadingServerTLS, TLSFilesError
    from ankka.gateway.app import Gateway
    from ankka.gateway.models_file import ModelsFile

    logging.basicConfig(level=logging.INFO, format="ankka gateway: %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request costs time
    models_file = ModelsFile(args.models)
    try:
        models = models_file.load()
        tls = (
            ReloadingServerTLS(args.tls_dir, interval_s=args.tls_reload_interval)
            if args.tls_dir
            else None
        )
    except (AnkkaError, TLSFilesError) as exc:
        print(f"ankka gateway: {exc}", file=sys.stderr)
        return 2
    sock = serve.bind(args.host, args.port)

    async def main() -> int:
        gateway = Gateway(models, models_file=models_file, max_body=args.max_body_bytes)
        async with gateway:
            if tls is None:
                await serve.serve_forever(gateway, sock, name="ankka gateway", proxy_headers=False)
            else:
                async with tls:
                    await serve.serve_forever(
                        gateway,
                        sock,
                        name="ankka gateway",
                        ssl_context=tls.context,
                        proxy_headers=False,  # callers are known by certificate, not headers
                    )
        return 0

    return serve.run(main)
