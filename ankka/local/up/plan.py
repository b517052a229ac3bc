"""What ``ankka up`` starts: a pure plan of parts, in the order they start.

Each :class:`Part` is one process: a name the user reads (``model``, ``gateway``,
``runtime``; no ``model`` when ``--model URL`` adopts a server that runs already), its
command, its environment, the port it must have, and the address it serves. The gateway's
models file is rendered by the operator's own builder
(:func:`ankka.operator.models.models_file`), so the laptop's file is the cluster's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ankka.local.local_model import MODEL_FILE
from ankka.local.up.adopt import Adopted
from ankka.local.up.state import State
from ankka.operator.models import ServedModel, models_file
from ankka.runtime.providers.config import ADDRESS_VARIABLE, TLS_DIR_VARIABLE
from ankka.runtime.serve.cli import CONSOLE_VARIABLE

__all__ = ["ModelChoice", "Options", "Part", "Probe", "models_yaml", "plan"]

HOST = "127.0.0.1"
GATEWAY_HOST = "localhost"  # the name in the gateway's certificate
MODEL_SETTING = "ANKKA_MODEL_DEFAULT_"


class ModelChoice(StrEnum):
    STANDIN = "standin"  # the scripted stand-in: calls tools, answers from a script
    LOCAL = "local"  # llama.cpp serving SmolLM2 (no tool calls)
    URL = "url"  # a server that runs already (Ollama, llama.cpp, any OpenAI-compatible one)


# The name runtimes put in "model", as an InstallationModel's name would be.
MODEL_NAMES = {ModelChoice.STANDIN: "standin", ModelChoice.LOCAL: "smollm2"}


@dataclass(frozen=True, slots=True)
class Options:
    target: str
    service: str  # the Service's name: the runtime's identity is ankka://service/local/<it>
    model: ModelChoice
    port: int
    gateway_port: int
    model_port: int
    script: Path | None
    python: str
    console: bool = True
    adopted: Adopted | None = None  # with ModelChoice.URL: the server asked before the start

    @property
    def model_name(self) -> str:
        """The name the runtime asks the gateway for (the server's own, for an adopted one)."""
        return self.adopted.model if self.adopted is not None else MODEL_NAMES[self.model]


@dataclass(frozen=True, slots=True)
class Probe:
    """Beyond its log line, a part is ready when ``url`` answers 200 over mTLS with the
    certificate in ``tls_dir`` and every model it lists has capabilities (the gateway's
    ``/readyz``: each model probed, and probed well)."""

    url: str
    tls_dir: Path


@dataclass(frozen=True, slots=True)
class Part:
    name: str
    what: str  # one line for the progress display
    command: tuple[str, ...]
    env: Mapping[str, str]
    port: int
    address: str
    log: Path
    ready_timeout: float = 60.0
    probe: Probe | None = None
    # A line of the part's log worth showing once it is ready (how it started), and the
    # prefix of the lines that begin its own report of a failure (shown from the last one).
    remark: str | None = None
    report_from: str | None = None


def models_yaml(options: Options) -> str:
    """The gateway's models file for the chosen model, rendered as the operator renders it."""
    url = f"http://{HOST}:{options.model_port}"
    name = options.model_name
    if options.adopted is not None:  # an endpoint adopted as it is, as an InstallationModel's
        found = options.adopted
        served = ServedModel(name, found.kind, found.url, found.capabilities, upstream_model=name)
    elif options.model is ModelChoice.STANDIN:
        # An adopted endpoint of kind ollama: the gateway probes /api/show, which the
        # stand-in answers from its script's "models".
        served = ServedModel(name=name, kind="ollama", url=url)
    else:
        served = ServedModel(name=name, kind="llamacpp", url=url, upstream_model=MODEL_FILE)
    return models_file([served])


def _inherited(environ: Mapping[str, str]) -> dict[str, str]:
    """The caller's environment without settings ``up`` decides itself."""
    mine = (MODEL_SETTING, ADDRESS_VARIABLE, TLS_DIR_VARIABLE, CONSOLE_VARIABLE)
    return {k: v for k, v in environ.items() if not k.startswith(mine)}


def plan(options: Options, state: State, environ: Mapping[str, str]) -> tuple[Part, ...]:
    base = {**_inherited(environ), "PYTHONUNBUFFERED": "1"}
    ankka = (options.python, "-m", "ankka")
    model_address = f"http://{HOST}:{options.model_port}"
    model: Part | None = None
    if options.model is ModelChoice.STANDIN:
        script = options.script
        assert script is not None, "the stand-in needs its script"
        model = Part(
            "model",
            f"the stand-in model ({script.name})",
            (*ankka, "standin", "--script", str(script), "--host", HOST,
             "--port", str(options.model_port), "--model", options.model_name),
            base, options.model_port, model_address, state.log("model"),
        )  # fmt: skip
    elif options.model is ModelChoice.LOCAL:
        model = Part(
            "model",
            "llama.cpp serving SmolLM2",
            (*ankka, "local-model", "--host", HOST, "--port", str(options.model_port),
             "--ready-timeout", "120"),
            base, options.model_port, model_address, state.log("model"), ready_timeout=150.0,
            remark=r"llama-server started [^\"\n]*", report_from="ankka local-model: ",
        )  # fmt: skip
    gateway_address = f"https://{GATEWAY_HOST}:{options.gateway_port}"
    gateway = Part(
        "gateway",
        "the model gateway (mTLS)",
        (*ankka, "gateway", "--models", str(state.models_file),
         "--tls-dir", str(state.tls_dir("gateway")), "--host", HOST,
         "--port", str(options.gateway_port)),
        base, options.gateway_port, gateway_address, state.log("gateway"),
        probe=Probe(f"{gateway_address}/readyz", state.tls_dir("runtime")),
    )  # fmt: skip
    runtime_env = {
        **base,
        f"{MODEL_SETTING}PRESET": "installation",
        f"{MODEL_SETTING}MODEL": options.model_name,
        ADDRESS_VARIABLE: gateway_address,
        TLS_DIR_VARIABLE: str(state.tls_dir("runtime")),
        CONSOLE_VARIABLE: "on" if options.console else "off",
    }
    runtime = Part(
        "runtime",
        f"ankka serve {options.target}",
        (*ankka, "serve", options.target, "--host", HOST, "--port", str(options.port),
         "--store", state.store),
        runtime_env, options.port, f"http://{HOST}:{options.port}", state.log("runtime"),
    )  # fmt: skip
    return (gateway, runtime) if model is None else (model, gateway, runtime)
