"""``ankka up --model standin``: three real processes, the cluster's path on loopback.

The answer goes runtime → gateway (mTLS; the runtime's identity shows in the gateway's
metrics) → the stand-in model; ``ankka down`` leaves no process behind; a second ``up`` is
refused while one runs; a port in use is named with its part; a part that fails names its log.
"""

from __future__ import annotations

import json
import signal
import socket
import ssl
from pathlib import Path

import httpx
import pytest

from ankka.local.up.state import alive
from tests.integration.up.conftest import Up, free_port, mtls, start_up
from tests.support.eventually import eventually

pytestmark = pytest.mark.integration


def test_the_answer_goes_through_the_gateway_with_the_runtimes_identity(
    running_up: Up,
) -> None:
    up = running_up
    parts = up.record()["parts"]
    assert isinstance(parts, list)
    assert [p["name"] for p in parts] == ["model", "gateway", "runtime"]
    answer = httpx.post(
        f"{up.url}/v1/agents/weather/sessions/s1",
        json={"message": "What is the weather in Helsinki?"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["reply"] == "It is -3 °C with light snow in Helsinki: dress warmly."
    assert [c["model"] for c in answer.json()["model_calls"]] == ["standin", "standin"]

    gateway = f"https://localhost:{up.gateway_port}"
    with httpx.Client(verify=mtls(up.state)) as client:
        metrics = client.get(f"{gateway}/metrics").text
    assert 'ankka_gateway_requests_total{caller="local/platform",model="standin"} 2.0' in metrics
    received = httpx.get(f"http://127.0.0.1:{up.model_port}/_standin/requests").json()
    chats = [r for r in received["requests"] if r["path"] == "/v1/chat/completions"]
    assert len(chats) == 2

    # The researcher's task goes the same way, and the console shows it.
    body = {"type": "summary", "instructions": "Summarise ankka."}
    put = httpx.put(f"{up.url}/v1/agents/researcher/tasks/t1", json=body, timeout=30)
    assert put.status_code == 201, put.text
    task = httpx.get(f"{up.url}/v1/tasks/t1", params={"wait": 60}, timeout=90).json()
    assert task["state"] == "completed", task
    with httpx.Client(verify=mtls(up.state)) as client:
        metrics = client.get(f"{gateway}/metrics").text
    assert 'ankka_gateway_requests_total{caller="local/platform",model="standin"} 4.0' in metrics
    assert 'data-state="completed"' in httpx.get(f"{up.url}/console/tasks/t1").text

    # The console is on under up, and shows the session.
    page = httpx.get(f"{up.url}/console/sessions/s1")
    assert page.status_code == 200
    assert 'data-tool="get_weather"' in page.text

    # Without a client certificate the gateway refuses the caller at the handshake.
    plain = ssl.create_default_context(cafile=str(up.state / "tls" / "runtime" / "ca.crt"))
    with pytest.raises(httpx.TransportError), httpx.Client(verify=plain) as client:
        client.get(f"{gateway}/v1/models").raise_for_status()


def test_a_second_up_while_one_runs_is_refused(running_up: Up) -> None:
    second = running_up.ankka("up", "--port", str(free_port()))
    assert second.returncode == 1
    assert "already up" in second.stderr
    assert str(running_up.record()["supervisor"]) in second.stderr
    assert all(alive(pid) for pid in running_up.pids())  # the first one is untouched


def test_status_shows_each_part_and_its_address(running_up: Up) -> None:
    shown = running_up.ankka("status")
    assert shown.returncode == 0, shown.stderr
    for name in ("model", "gateway", "runtime"):
        assert name in shown.stdout
    assert f"https://localhost:{running_up.gateway_port}" in shown.stdout


def test_down_stops_every_part_it_recorded(up_state: Path) -> None:
    up = start_up(up_state)
    try:
        pids = [up.process.pid, *up.pids()]
        down = up.ankka("down")
        assert down.returncode == 0, down.stderr
        assert up.wait(30) == 0
    finally:
        up.stop()
    assert [pid for pid in pids if alive(pid)] == []
    assert not (up_state / "run.json").exists()
    assert up.ankka("status").returncode == 3


def test_ctrl_c_stops_everything(up_state: Path) -> None:
    up = start_up(up_state)
    try:
        pids = up.pids()
        up.process.send_signal(signal.SIGINT)
        assert up.wait(40) == 0
    finally:
        up.stop()
    assert [pid for pid in pids if alive(pid)] == []
    assert "stopped model, gateway, runtime" in up.text


def test_a_port_in_use_names_the_part_and_the_port(up_state: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        up = start_up(up_state, "--gateway-port", str(port), ready="ankka up: up in")
        try:
            code = up.wait(30)
        finally:
            up.stop()  # a test that fails leaves no up behind
    assert code == 1
    assert f"the gateway's port {port} on 127.0.0.1 is in use" in up.text
    assert "--gateway-port" in up.text
    assert "starting model" not in up.text  # refused before anything started


def test_a_part_that_fails_stops_the_others_and_names_its_log(
    up_state: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"turns": [{"nonsense": 1}]}))
    up = start_up(up_state, "--script", str(broken))
    try:
        assert up.wait(30) == 1
    finally:
        up.stop()
    log = up_state / "logs" / "model.log"
    assert "the model (the stand-in model (broken.json)) exited with code 2" in up.text
    assert str(log) in up.text
    assert "starting gateway" not in up.text


def test_a_killed_up_leaves_no_part_and_a_new_up_starts(up_state: Path) -> None:
    up = start_up(up_state)
    try:
        pids = up.pids()
        up.process.send_signal(signal.SIGKILL)
        up.wait(10)
        # Each part dies with its parent (PR_SET_PDEATHSIG): nothing is left holding a port.
        eventually(
            lambda: [pid for pid in pids if alive(pid)] == [],
            what="every part of ankka up to end with it",
            timeout=30,
            interval=0.1,
        )
        assert up.ankka("status").returncode == 3  # the record's supervisor is gone
    finally:
        up.stop()
    again = start_up(up_state)
    try:
        assert again.ankka("status").returncode == 0
    finally:
        again.stop()
