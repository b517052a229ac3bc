"""The local model's pure helpers: finding files, planning library links, the command line."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from ankka._kernel.errors import ConfigurationError
from ankka.local import cli_local_model, local_model
from ankka.local.local_model import (
    INSTALL_COMMAND,
    LIBRARY_LINKS,
    NotInstalledError,
    env_lines,
    plan_links,
    server_command,
    server_env,
)

WHEEL_BIN = [
    "llama-server",
    "libllama.so.0.6.0",
    "libllama-common.so.0.6.0",
    "libggml.so.0.26.0",
    "libggml-base.so.0.26.0",
    "libggml-cpu.so.0.26.0",
    "libmtmd.so.0.6.0",
]


def test_cache_dir_prefers_ankka_cache_then_home() -> None:
    assert local_model.cache_dir({"ANKKA_CACHE": "/c", "HOME": "/h"}) == Path("/c")
    assert local_model.cache_dir({"HOME": "/h"}) == Path("/h/.cache/ankka")


def test_plan_links_names_every_soname_the_server_needs() -> None:
    plan = plan_links(WHEEL_BIN)
    assert set(plan) == set(LIBRARY_LINKS)
    assert plan["libggml-base.so.0"] == "libggml-base.so.0.26.0"
    assert plan["libllama.so.0"] == "libllama.so.0.6.0"


def test_plan_links_leaves_present_sonames_alone() -> None:
    plan = plan_links([*WHEEL_BIN, "libllama.so.0"])
    assert "libllama.so.0" not in plan


def test_plan_links_uses_an_unversioned_library_when_nothing_versioned_exists() -> None:
    assert plan_links(["libmtmd.so"]) == {"libmtmd.so.0": "libmtmd.so"}
    assert plan_links(["libmtmd.so", "libmtmd.so.0.0.1"]) == {"libmtmd.so.0": "libmtmd.so.0.0.1"}


def test_plan_links_links_only_the_sonames_the_server_asks_for() -> None:
    plan = plan_links([*WHEEL_BIN, "libllama-server-impl.so", "libother.so.3.1"])
    assert set(plan) == set(LIBRARY_LINKS)


def test_plan_links_leaves_out_a_soname_nothing_provides() -> None:
    assert plan_links(["libllama.so.0.6.0"]) == {"libllama.so.0": "libllama.so.0.6.0"}


def test_make_links_is_idempotent_and_repairs_stale_links(tmp_path: Path) -> None:
    bin_dir, link_dir = tmp_path / "bin", tmp_path / "lib"
    bin_dir.mkdir()
    for name in WHEEL_BIN:
        (bin_dir / name).write_bytes(b"")
    link_dir.mkdir()
    (link_dir / "libggml.so.0").symlink_to(tmp_path / "gone")

    assert local_model.make_links(bin_dir, link_dir) == link_dir
    local_model.make_links(bin_dir, link_dir)

    for soname in LIBRARY_LINKS:
        assert (link_dir / soname).resolve().parent == bin_dir.resolve()
    assert (link_dir / "libggml.so.0").resolve() == (bin_dir / "libggml.so.0.26.0").resolve()
    assert sorted(p.name for p in link_dir.iterdir()) == sorted(LIBRARY_LINKS)


def test_make_links_names_the_libraries_a_changed_wheel_lacks(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "libllama.so.0.0.1").write_bytes(b"")
    with pytest.raises(NotInstalledError, match=r"libmtmd\.so\.0") as caught:
        local_model.make_links(bin_dir, tmp_path / "lib")
    assert INSTALL_COMMAND in str(caught.value)


def test_a_missing_server_package_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(local_model, "_package_dir", lambda package: None)
    with pytest.raises(NotInstalledError, match="not installed") as caught:
        local_model.find_server_binary()
    assert INSTALL_COMMAND in str(caught.value)


def test_a_package_without_its_binary_names_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(NotInstalledError, match="llama-server is missing") as caught:
        local_model.find_server_binary(tmp_path)
    assert INSTALL_COMMAND in str(caught.value)


def test_a_missing_model_names_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(NotInstalledError, match=local_model.MODEL_FILE) as caught:
        local_model.find_model(tmp_path)
    assert INSTALL_COMMAND in str(caught.value)


def test_a_missing_explicit_model_says_to_check_the_path(tmp_path: Path) -> None:
    with pytest.raises(NotInstalledError, match="check the path"):
        local_model.find_model(tmp_path, explicit=tmp_path / "other.gguf")


def test_server_command_binds_loopback_with_the_jinja_template() -> None:
    command = server_command(
        Path("/b/llama-server"), Path("/m/x.gguf"), host="127.0.0.1", port=9000, ctx=2048,
        threads=2,
    )  # fmt: skip
    assert command[0] == "/b/llama-server"
    assert "--jinja" in command
    pairs = dict(itertools.pairwise(command))
    assert pairs["--model"] == "/m/x.gguf"
    assert pairs["--alias"] == "x.gguf", "the served id is the file name, not the path"
    assert pairs["--host"] == "127.0.0.1"
    assert pairs["--port"] == "9000"
    assert pairs["-c"] == "2048"
    assert pairs["--threads"] == "2"
    assert pairs["--n-predict"] == "1024", "a rambling reply stops before the caller's timeout"


@pytest.mark.parametrize(
    ("port", "ctx", "threads", "word"),
    [
        (0, 2048, 1, "port"),
        (70000, 2048, 1, "port"),
        (80, 10, 1, "context"),
        (80, 2048, 0, "threads"),
    ],
)
def test_server_command_refuses_nonsense(port: int, ctx: int, threads: int, word: str) -> None:
    with pytest.raises(ConfigurationError, match=word):
        server_command(Path("b"), Path("m"), host="h", port=port, ctx=ctx, threads=threads)


def test_server_env_puts_the_link_folder_first() -> None:
    assert server_env({}, Path("/l"))["LD_LIBRARY_PATH"] == "/l"
    env = server_env({"LD_LIBRARY_PATH": "/x", "A": "1"}, Path("/l"))
    assert env == {"LD_LIBRARY_PATH": "/l:/x", "A": "1"}


def test_env_lines_point_a_named_model_at_the_openai_compatible_url() -> None:
    assert env_lines("http://127.0.0.1:8080", "m.gguf") == [
        "ANKKA_MODEL_DEFAULT_PRESET=openai-compatible",
        "ANKKA_MODEL_DEFAULT_URL=http://127.0.0.1:8080/v1",
        "ANKKA_MODEL_DEFAULT_MODEL=m.gguf",
    ]


def test_default_threads_uses_the_cores_up_to_eight() -> None:
    assert local_model.default_threads(2) == 2
    assert local_model.default_threads(64) == 8


def test_main_reports_a_missing_install_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(local_model, "_package_dir", lambda package: None)
    assert cli_local_model.main(["--port", "9"]) == 1
    assert INSTALL_COMMAND in capsys.readouterr().err


def _server_running(tmp_path: Path, code: str) -> local_model.LocalServer:
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as sink:
        process = subprocess.Popen([sys.executable, "-c", code], stdout=sink, stderr=sink)
    return local_model.LocalServer(process, "127.0.0.1", local_model.free_port(), "m", log_path)


def test_a_server_that_exits_early_is_waited_for_no_longer(tmp_path: Path) -> None:
    server = _server_running(tmp_path, "print('no such option', flush=True); raise SystemExit(3)")
    server.process.wait()
    code = local_model._wait_ready(server, timeout=30.0, clock=lambda: 0.0, sleep=lambda _: None)
    assert code == 3
    assert "no such option" in server.log_tail()


def test_a_server_that_never_answers_fails_at_the_deadline_and_is_stoppable(
    tmp_path: Path,
) -> None:
    server = _server_running(tmp_path, "import time; time.sleep(60)")
    ticks = iter([0.0, 5.0, 11.0])
    try:
        with pytest.raises(local_model.StartError, match="within 10 s"):
            local_model._wait_ready(
                server, timeout=10.0, clock=lambda: next(ticks), sleep=lambda _: None
            )
    finally:
        assert server.stop(timeout=5.0) != 0
    assert server.process.poll() is not None


def test_base_url_brackets_an_ipv6_host(tmp_path: Path) -> None:
    server = _server_running(tmp_path, "pass")
    server.process.wait()
    server.host = "::1"
    assert server.base_url.startswith("http://[::1]:")
