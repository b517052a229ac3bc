"""Run the stand-in model server: a real HTTP server answering from a JSON script.

The script is a list of turns served in order, each {"text": "..."} or
{"tool_calls": [{"name": "...", "arguments": {...}}]}, optionally with
"usage": {"input_tokens": N, "output_tokens": N} and "delay_ms": N. When no turn is left it
answers 418. GET /_standin/requests shows what it received. The first line printed is
"ankka standin: listening on http://HOST:PORT"; point a model at http://HOST:PORT/v1.
"""

from __future__ import annotations

import argparse
import sys

from ankka._kernel import serve
from ankka._kernel.errors import AnkkaError

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--script", required=True, metavar="FILE", help="the JSON script")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (%(default)s)")
    parser.add_argument("--port", type=int, default=8090, help="port; 0 picks a free one")
    parser.add_argument("--model", default="standin", help="model name it reports")


def run(args: argparse.Namespace) -> int:
    from ankka.runtime.standin.script import load_script
    from ankka.runtime.standin.server import create_app

    try:
        script = load_script(args.script)
    except AnkkaError as exc:
        print(f"ankka standin: {exc}", file=sys.stderr)
        return 2
    sock = serve.bind(args.host, args.port)

    async def main() -> int:
        await serve.serve_forever(create_app(script, model=args.model), sock, name="ankka standin")
        return 0

    return serve.run(main)
