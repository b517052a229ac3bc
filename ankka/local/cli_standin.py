"""Run the stand-in model server: a real HTTP server answering from a JSON script.

The script is a list of turns served in order, each {"text": "..."} or
{"tool_calls": [{"name": "...", "arguments": {...}}]}, optionally with
"usage": {"input_tokens": N, "output_tokens": N} and "delay_ms": N. When no turn is left it
answers 418. It speaks Chat Completions (/v1/chat/completions), OpenAI Responses
(/v1/responses), Anthropic Messages (/v1/messages) and Ollama's /api/show, all from the one
script. GET /_standin/requests shows what it received. The first line printed is
"ankka standin: listening on http://HOST:PORT"; point a model at http://HOST:PORT/v1 (an
Anthropic client at http://HOST:PORT).
"""

from __future__ import annotations

import argparse
import os
import sys

from ankka._kernel import serve
from ankka._kernel.errors import AnkkaError
from ankka._kernel.logs import say

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--script", required=True, metavar="FILE", help="the JSON script")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (%(default)s)")
    parser.add_argument(
        "--port", type=serve.port_number, default=8090, help="port; 0 picks a free one"
    )
    parser.add_argument("--model", default="standin", help="model name it reports")
    parser.add_argument(
        "--api-key-env",
        metavar="VARIABLE",
        help="answer 401 unless requests carry the key held in this environment variable "
        "(a variable, so the key never shows in a process listing)",
    )


def run(args: argparse.Namespace) -> int:
    from ankka.local.standin.server import create_app
    from ankka.runtime.providers.script import load_script

    try:
        script = load_script(args.script)
    except AnkkaError as exc:
        say(f"ankka standin: {exc}", stream=sys.stderr, level="ERROR")
        return 2
    api_key: str | None = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            say(f"ankka standin: {args.api_key_env} is not set", stream=sys.stderr, level="ERROR")
            return 2
    sock = serve.bind(args.host, args.port)
    app = create_app(script, model=args.model, api_key=api_key)

    async def main() -> int:
        await serve.serve_forever(app, sock, name="ankka standin")
        return 0

    return serve.run(main)
