"""``ankka up``'s pure parts: the plan of processes, the models file, the state record, the
certificates."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from ankka._kernel.errors import ConfigurationError
from ankka.local import demo
from ankka.local.up.adopt import Adopted, model_url
from ankka.local.up.pki import ensure_ca, issue_certificates
from ankka.local.up.plan import ModelChoice, Options, models_yaml, plan
from ankka.local.up.state import PartRecord, RunRecord, State, state_dir
from ankka.operator.certs import GATEWAY_URI, KeyPair, needs_renewal, uris_of

NOW = dt.datetime(2026, 12, 1, 8, 0, tzinfo=dt.UTC)
ROOT = Path(__file__).resolve().parents[4]


def _options(model: ModelChoice = ModelChoice.STANDIN) -> Options:
    return Options(
        target="ankka.local.demo:service",
        service="platform",
        model=model,
        port=8000,
        gateway_port=8443,
        model_port=8090,
        script=Path("/x/up-standin.json"),
        python="/usr/bin/python3",
    )


def test_the_runtime_reaches_its_model_as_an_installation_model_through_the_gateway(
    tmp_path: Path,
) -> None:
    state = State(tmp_path)
    inherited = {"ANKKA_MODEL_DEFAULT_URL": "http://elsewhere/v1", "HOME": "/home/me"}
    model, gateway, runtime = plan(_options(), state, inherited)
    assert [model.name, gateway.name, runtime.name] == ["model", "gateway", "runtime"]
    assert runtime.env["ANKKA_MODEL_DEFAULT_PRESET"] == "installation"
    assert runtime.env["ANKKA_MODEL_DEFAULT_MODEL"] == "standin"
    assert runtime.env["ANKKA_MODELS_ADDRESS"] == "https://localhost:8443"
    assert runtime.env["ANKKA_TLS_DIR"] == str(tmp_path / "tls" / "runtime")
    assert runtime.env["ANKKA_CONSOLE"] == "on"
    assert "ANKKA_MODEL_DEFAULT_URL" not in runtime.env  # the caller's own model is not used
    assert runtime.env["HOME"] == "/home/me"
    assert "--tls-dir" in gateway.command
    assert "--insecure" not in gateway.command
    # The gateway is ready once its /readyz, asked with the runtime's own certificate, is.
    assert gateway.probe is not None
    assert gateway.probe.url == "https://localhost:8443/readyz"
    assert gateway.probe.tls_dir == tmp_path / "tls" / "runtime"
    assert [p.port for p in (model, gateway, runtime)] == [8090, 8443, 8000]


def test_the_models_file_is_the_operators_rendering() -> None:
    standin = yaml.safe_load(models_yaml(_options()))
    assert standin == [{"name": "standin", "kind": "ollama", "url": "http://127.0.0.1:8090"}]
    local = yaml.safe_load(models_yaml(_options(ModelChoice.LOCAL)))
    assert local[0]["kind"] == "llamacpp"
    assert local[0]["name"] == "smollm2"
    assert local[0]["upstream_model"].endswith(".gguf")


def test_the_state_directory_is_ankka_state_or_the_xdg_default() -> None:
    assert state_dir({"ANKKA_STATE": "/tmp/s", "HOME": "/h"}) == Path("/tmp/s")
    assert state_dir({"HOME": "/h"}) == Path("/h/.local/state/ankka")


def test_a_run_record_round_trips_and_a_dead_supervisors_record_is_not_running(
    tmp_path: Path,
) -> None:
    state = State(tmp_path)
    record = RunRecord(2**22 + 12345, "m:s", "standin", NOW.isoformat()).with_part(
        PartRecord("model", 1, "http://127.0.0.1:1", "/l")
    )
    state.write(record)
    assert state.read() == record
    assert state.running() is None  # no such PID
    (tmp_path / "run.json").write_text("{torn")
    assert state.read() is None


def test_the_ca_is_made_once_and_the_certificates_carry_the_operators_identities(
    tmp_path: Path,
) -> None:
    ca, made = ensure_ca(tmp_path / "ca", now=NOW)
    again, made_again = ensure_ca(tmp_path / "ca", now=NOW)
    assert (made, made_again) == (True, False)
    assert again == ca
    assert oct((tmp_path / "ca" / "tls.key").stat().st_mode & 0o777) == "0o600"
    issued = issue_certificates(
        ca,
        gateway_dir=tmp_path / "g",
        runtime_dir=tmp_path / "r",
        service="platform",
        now=NOW,
    )
    assert issued.runtime_uri == "ankka://service/local/platform"
    for folder, uri in ((tmp_path / "g", GATEWAY_URI), (tmp_path / "r", issued.runtime_uri)):
        pair = KeyPair((folder / "tls.crt").read_text(), (folder / "tls.key").read_text())
        assert uris_of(pair.cert_pem) == [uri]
        assert needs_renewal(pair, ca=ca, uri=uri, now=NOW) is None
        assert (folder / "ca.crt").read_text() == ca.cert_pem


def test_an_adopted_server_is_no_part_and_is_served_as_the_operator_adopts_one(
    tmp_path: Path,
) -> None:
    ollama = Adopted("http://127.0.0.1:11434", "llama3.1:8b", "ollama")
    options = replace(_options(ModelChoice.URL), adopted=ollama, script=None)
    gateway, runtime = plan(options, State(tmp_path), {})
    assert [gateway.name, runtime.name] == ["gateway", "runtime"]
    assert runtime.env["ANKKA_MODEL_DEFAULT_MODEL"] == "llama3.1:8b"
    rendered = yaml.safe_load(models_yaml(options))
    assert rendered == [{"name": "llama3.1:8b", "kind": "ollama", "url": "http://127.0.0.1:11434"}]
    plain = Adopted("http://10.0.0.5:8000", "m", "openai", ("completion", "tools"))
    rendered = yaml.safe_load(models_yaml(replace(options, adopted=plain)))
    assert rendered[0]["kind"] == "openai"
    assert rendered[0]["capabilities"] == ["completion", "tools"]


def test_the_models_url_drops_v1_and_refuses_what_is_no_url() -> None:
    assert model_url("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080"
    assert model_url("http://127.0.0.1:11434") == "http://127.0.0.1:11434"
    with pytest.raises(ConfigurationError, match="--model='localhost:11434' is not an http"):
        model_url("localhost:11434")


def test_the_demo_ships_the_clones_stand_in_script() -> None:
    # examples/up-standin.json is kept for `--script examples/up-standin.json`; one content.
    with demo.script() as packaged:
        assert packaged.read_bytes() == (ROOT / "examples" / "up-standin.json").read_bytes()
    assert sorted(demo.service.agents) == ["chat", "weather"]
    assert sorted(demo.service.autonomous_agents) == ["researcher"]
