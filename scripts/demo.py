"""The README's main job: the weather agent answers with its tool, end to end, on loopback.

Starts the stand-in model server with the script in examples/, serves examples.weather with
``ankka serve`` on an SQLite store, asks one question over HTTP, prints the conversation as
the journal holds it, and stops both servers. When the real local model is installed
(``bash scripts/local_model.sh``), it then asks the same agent again on llama.cpp serving
SmolLM2: a real model, which answers in its own words (it cannot call tools, so the tool path
is the stand-in's part).
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


def ask(store: str, env: dict[str, str], question: str) -> bool:
    """Serve the weather agent with ``env``'s model, ask ``question``, show the conversation."""
    command = ankka_command("serve", "examples.weather:service", "--port", "0", "--store", store)
    with started(command, env=env) as server:
        print(f"  served by : ankka serve examples.weather:service at {server.url}")
        print(f"  store     : {store}\n")
        answer = httpx.post(
            f"{server.url}/v1/agents/weather/sessions/demo",
            json={"message": question},
            timeout=120,
        )
        if answer.status_code != 200:
            print(f"the turn failed: {answer.text}", file=sys.stderr)
            return False
        show(httpx.get(f"{server.url}/v1/sessions/demo/messages").json()["messages"])
        print(
            f"\n  tokens: {json.dumps(answer.json()['usage'])}; cost: {answer.json()['cost']} "
            "(ankka counts tokens, not money)\n"
        )
    return True


def real_model_part(question: str, workdir: Path) -> bool:
    from ankka.local import local_model

    try:
        local_model.find_server_binary()
        local_model.find_model()
    except local_model.LocalModelError:
        print(
            "A real local model is not installed. `bash scripts/local_model.sh` installs\n"
            "llama.cpp's server and SmolLM2 (the first build takes about 10 minutes); then\n"
            "`make demo` also asks the agent on it.\n"
        )
        return True
    print("The same agent on a real model: llama.cpp serving SmolLM2-135M-Instruct")
    print("  (it cannot call tools, so it answers in its own words)")
    with local_model.start(port=local_model.free_port(), ctx=2048) as llama:
        print(f"  model     : {llama.model_name} at {llama.base_url}/v1")
        env = {
            "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
            "ANKKA_MODEL_DEFAULT_URL": f"{llama.base_url}/v1",
            "ANKKA_MODEL_DEFAULT_MODEL": llama.model_name,
        }
        return ask(f"sqlite:///{workdir / 'real.sqlite3'}", env, question)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--question", default="What is the weather in Helsinki?")
    parser.add_argument(
        "--standin-only", action="store_true", help="skip the real local model even if installed"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        store = f"sqlite:///{Path(workdir) / 'demo.sqlite3'}"
        with started(ankka_command("standin", "--script", str(SCRIPT), "--port", "0")) as model:
            env = {
                "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
                "ANKKA_MODEL_DEFAULT_URL": f"{model.url}/v1",
                "ANKKA_MODEL_DEFAULT_MODEL": "standin",
            }
            print("ankka demo: the weather agent (examples/weather.py)")
            print(f"  model     : the stand-in at {model.url}/v1 ({SCRIPT.name})")
            if not ask(store, env, args.question):
                return 1
        if not args.standin_only and not real_model_part(args.question, Path(workdir)):
            return 1
    print(
        "To use another model, point the same agent at any OpenAI-compatible server:\n"
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
