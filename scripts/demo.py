"""The README's main job: the weather agent answers with its tool, end to end, on loopback.

Starts the stand-in model server with the script in examples/, serves examples.weather with
``ankka serve`` on an SQLite store, asks one question over HTTP, prints the conversation as
the journal holds it, and stops both servers.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.processes import REPO, ankka_command, started

SCRIPT = REPO / "examples" / "weather-standin.json"


def show(messages: list[dict[str, object]]) -> None:
    for m in messages:
        role = m["role"]
        if role == "user":
            print(f"  you      › {m['content']}")
        elif role == "tool":
            print(f"  tool     ← {m['content']}")
        else:
            for call in m.get("tool_calls", []) or []:  # type: ignore[attr-defined]
                print(f"  {m['agent']:<8} → {call['name']}({call['arguments']})")
            if m.get("content"):
                print(f"  {m['agent']:<8} › {m['content']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--question", default="What is the weather in Helsinki?")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        store = f"sqlite:///{Path(workdir) / 'demo.sqlite3'}"
        with started(ankka_command("standin", "--script", str(SCRIPT), "--port", "0")) as model:
            env = {
                "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
                "ANKKA_MODEL_DEFAULT_URL": f"{model.url}/v1",
                "ANKKA_MODEL_DEFAULT_MODEL": "standin",
            }
            command = ankka_command(
                "serve", "examples.weather:service", "--port", "0", "--store", store
            )
            with started(command, env=env) as server:
                print("ankka demo: the weather agent (examples/weather.py)")
                print(f"  served by : ankka serve examples.weather:service at {server.url}")
                print(f"  model     : the stand-in at {model.url}/v1 ({SCRIPT.name})")
                print(f"  store     : {store}\n")
                answer = httpx.post(
                    f"{server.url}/v1/agents/weather/sessions/demo",
                    json={"message": args.question},
                    timeout=60,
                )
                if answer.status_code != 200:
                    print(f"the turn failed: {answer.text}", file=sys.stderr)
                    return 1
                conversation = httpx.get(f"{server.url}/v1/sessions/demo/messages").json()
                show(conversation["messages"])
                usage = answer.json()["usage"]
                print(
                    f"\n  tokens: {json.dumps(usage)}; cost: {answer.json()['cost']} "
                    "(ankka counts tokens, not money)"
                )
    print(
        "\nTo use a real model, point the same agent at any OpenAI-compatible server:\n"
        "  export ANKKA_MODEL_DEFAULT_PRESET=openai-compatible\n"
        "  export ANKKA_MODEL_DEFAULT_URL=http://127.0.0.1:8080/v1\n"
        "  export ANKKA_MODEL_DEFAULT_MODEL=<model name>\n"
        "  ankka serve examples.weather:service --port 8000\n"
        "  curl -s localhost:8000/v1/agents/weather/sessions/me "
        '-d \'{"message": "Weather in Oslo?"}\''
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
