"""The llama-server image's entrypoint (``python3 -m ankka.local.llama_fallback``): a pod on a
node that refuses AMX serves instead of crash-looping.

The files are written by ``scripts/image.sh llama-entrypoint`` (what the image gets under
``/opt/llama/start``) into a temporary folder and run from there with ``python -S`` (no
site-packages: no ankka installed, none of its dependencies), as the image's python3 runs
them, in front of the fake servers of tests/support/fake_llama.py: one that dies of SIGILL
unless given ``--no-repack``, one that dies on every start.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from ankka._kernel.exits import exit_words
from ankka.local import llama_fallback
from ankka.local.local_model import free_port
from tests.support.eventually import eventually
from tests.support.fake_llama import calls, fake_server
from tests.support.processes import REPO


def _entrypoint(tmp_path: Path, server: Path, port: int) -> subprocess.Popen[bytes]:
    """The entrypoint as the container runs it; its output (the pod's log) in ``pod.log``."""
    tree = tmp_path / "opt-llama-start"
    subprocess.run(
        ["bash", str(REPO / "scripts" / "image.sh"), "llama-entrypoint", str(tree)],
        check=True,
        timeout=60,
    )
    args = ["--model", "/models/m.gguf", "--host", "0.0.0.0", "--port", str(port)]
    with (tmp_path / "pod.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-S", "-m", "ankka.local.llama_fallback", str(server), *args],
            stdout=log,
            stderr=log,
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
            start_new_session=True,  # its own group: _kill ends it and its server together
        )


def _kill(entry: subprocess.Popen[bytes]) -> None:
    """After a failed test: no entrypoint, nor its server, is left behind."""
    if entry.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(entry.pid, signal.SIGKILL)
        entry.wait()


def _log(tmp_path: Path) -> str:
    return (tmp_path / "pod.log").read_text()


def _health(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def test_a_server_that_dies_of_sigill_is_started_again_with_no_repack_and_serves(
    tmp_path: Path,
) -> None:
    calls_file = tmp_path / "calls.txt"
    server = fake_server(tmp_path / "llama-server", calls_file, dies="SIGILL")
    port = free_port()
    entry = _entrypoint(tmp_path, server, port)
    try:
        eventually(
            lambda: "llama-server started" in _log(tmp_path),
            what="the entrypoint to see its server answer /health",
            timeout=30,
        )
        assert _health(port)
        assert entry.poll() is None  # still the server's parent
        assert [("--no-repack" in c) for c in calls(calls_file)] == [False, True]
        entry.send_signal(signal.SIGTERM)  # as the kubelet stops a pod
        entry.wait(timeout=30)
    finally:
        _kill(entry)
    assert entry.returncode == 0  # the server's own exit on SIGTERM, passed on
    err = _log(tmp_path)
    assert (
        "llama-server died of illegal instruction (SIGILL) before it was ready; "
        "trying with --no-repack" in err
    )
    assert (
        "llama-server started with --no-repack: as built it died of illegal instruction "
        "(SIGILL) before it was ready" in err
    )


def test_a_server_that_dies_on_every_start_ends_the_container_naming_each_attempt(
    tmp_path: Path,
) -> None:
    calls_file = tmp_path / "calls.txt"
    server = fake_server(tmp_path / "llama-server", calls_file, dies="SIGILL", always=True)
    entry = _entrypoint(tmp_path, server, free_port())
    try:
        entry.wait(timeout=60)
    finally:
        _kill(entry)
    err = _log(tmp_path)
    assert entry.returncode == 128 + signal.SIGILL  # what the operator reads as SIGILL
    assert "did not start in any of the 2 ways ankka tries" in err
    assert "1. as built: it died of illegal instruction (SIGILL) before it was ready" in err
    assert "2. with --no-repack: it died of illegal instruction (SIGILL) before it was ready" in err
    assert len(calls(calls_file)) == 2


def test_a_pod_stopped_while_its_server_starts_stops_it_and_tries_nothing_else(
    tmp_path: Path,
) -> None:
    calls_file = tmp_path / "calls.txt"
    server = tmp_path / "llama-server"  # loads for ever, exits 0 on SIGTERM
    server.write_text(
        # the trap first: the test stops the pod once the call is written
        f"#!/bin/sh\ntrap 'exit 0' TERM\necho \"$*\" >> {calls_file}\nwhile :; do sleep 0.1; done\n"
    )
    server.chmod(0o755)
    entry = _entrypoint(tmp_path, server, free_port())
    try:
        eventually(lambda: calls(calls_file), what="the server to be started", timeout=30)
        entry.send_signal(signal.SIGTERM)
        assert entry.wait(timeout=30) == 0
    finally:
        _kill(entry)
    assert len(calls(calls_file)) == 1
    assert "did not start" not in _log(tmp_path)


def test_a_server_given_no_repack_already_is_started_once(tmp_path: Path) -> None:
    calls_file = tmp_path / "calls.txt"
    server = fake_server(tmp_path / "llama-server", calls_file, dies="SIGSEGV", always=True)
    code = llama_fallback.main(
        [str(server), "--port", str(free_port()), "--no-repack"],
        env={},
        launch=lambda command: subprocess.Popen(command, stdout=subprocess.DEVNULL),
    )
    assert code == 128 + signal.SIGSEGV
    assert len(calls(calls_file)) == 1


@pytest.mark.parametrize(("forced", "tried"), [("off", [True]), ("on", [False])])
def test_the_environment_forces_one_way(tmp_path: Path, forced: str, tried: list[bool]) -> None:
    calls_file = tmp_path / "calls.txt"
    server = fake_server(tmp_path / "llama-server", calls_file, dies="SIGILL", always=True)
    before = signal.getsignal(signal.SIGTERM)
    code = llama_fallback.main(
        [str(server), "--port", str(free_port())],
        env={"ANKKA_LLAMA_REPACK": forced},
        launch=lambda command: subprocess.Popen(command, stdout=subprocess.DEVNULL),
    )
    assert code == 128 + signal.SIGILL
    assert ["--no-repack" in args for args in calls(calls_file)] == tried
    assert signal.getsignal(signal.SIGTERM) == before  # the caller's handlers are back


@pytest.mark.parametrize(
    ("args", "env", "url"),
    [
        (["--host", "0.0.0.0", "--port", "8080"], {}, "http://127.0.0.1:8080/health"),
        (["--port=9000"], {}, "http://127.0.0.1:9000/health"),
        ([], {"LLAMA_ARG_PORT": "7000"}, "http://127.0.0.1:7000/health"),
        (["--host", "::1", "--port", "1"], {}, "http://[::1]:1/health"),
        ([], {}, "http://127.0.0.1:8080/health"),  # llama-server's own default port
    ],
)
def test_the_health_url_follows_the_server_s_arguments(
    args: list[str], env: dict[str, str], url: str
) -> None:
    assert llama_fallback.health_url(args, env) == url


@pytest.mark.parametrize(
    ("returncode", "words"),
    [
        (-4, "died of illegal instruction (SIGILL)"),
        (132, "died of illegal instruction (SIGILL)"),
        (-11, "died of segmentation fault (SIGSEGV)"),
        (139, "died of segmentation fault (SIGSEGV)"),
        (-7, "died of bus error (SIGBUS)"),
        (1, "exited with code 1"),
        (0, "exited with code 0"),
    ],
)
def test_exits_are_named_by_their_signal(returncode: int, words: str) -> None:
    assert exit_words(returncode) == words


def test_only_crash_signals_are_worth_another_way() -> None:
    assert llama_fallback.worth_another_way(-signal.SIGILL)
    assert llama_fallback.worth_another_way(128 + signal.SIGBUS)
    assert not llama_fallback.worth_another_way(1)
    assert not llama_fallback.worth_another_way(-signal.SIGKILL)  # killed: not the CPU's doing
    assert not llama_fallback.worth_another_way(None)  # never answered: not a crash
