"""Where ``ankka up`` keeps its state, and the record of what it started.

The state directory is ``$ANKKA_STATE`` or ``~/.local/state/ankka``. It holds the local CA
(``ca/``), the certificates issued from it (``tls/gateway``, ``tls/runtime``), the rendered
models file, one log per part (``logs/``), the session store, and ``run.json``: the PIDs,
addresses and logs of the parts of the ``up`` that runs now. ``run.json`` is written when a
part starts and removed when ``up`` stops; a record whose supervisor is gone is stale and is
cleared by the next ``up`` or ``down``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ankka._kernel.errors import ConfigurationError

__all__ = ["PartRecord", "RunRecord", "State", "alive", "state_dir"]

STATE_VARIABLE = "ANKKA_STATE"


def state_dir(environ: Mapping[str, str]) -> Path:
    explicit = environ.get(STATE_VARIABLE, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    return Path(environ.get("HOME", "~")).expanduser() / ".local" / "state" / "ankka"


def alive(pid: int) -> bool:
    """True when a process with this PID exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


@dataclass(frozen=True, slots=True)
class PartRecord:
    name: str
    pid: int
    address: str
    log: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "pid": self.pid, "address": self.address, "log": self.log}


@dataclass(frozen=True, slots=True)
class RunRecord:
    """What one ``ankka up`` runs: its own PID (the supervisor) and its parts."""

    supervisor: int
    target: str
    model: str
    started_at: str
    parts: tuple[PartRecord, ...] = field(default=())

    def with_part(self, part: PartRecord) -> RunRecord:
        return RunRecord(
            self.supervisor, self.target, self.model, self.started_at, (*self.parts, part)
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "supervisor": self.supervisor,
            "target": self.target,
            "model": self.model,
            "started_at": self.started_at,
            "parts": [p.as_dict() for p in self.parts],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        parts = tuple(
            PartRecord(str(p["name"]), int(p["pid"]), str(p["address"]), str(p["log"]))
            for p in data.get("parts", ())
        )
        return cls(
            int(data["supervisor"]),
            str(data["target"]),
            str(data["model"]),
            str(data["started_at"]),
            parts,
        )


@dataclass(frozen=True, slots=True)
class State:
    """The paths under one state directory."""

    root: Path

    @property
    def ca_dir(self) -> Path:
        return self.root / "ca"

    def tls_dir(self, part: str) -> Path:
        return self.root / "tls" / part

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def log(self, part: str) -> Path:
        return self.logs / f"{part}.log"

    @property
    def models_file(self) -> Path:
        return self.root / "models.yaml"

    @property
    def store(self) -> str:
        return f"sqlite:///{self.root / 'sessions.sqlite3'}"

    @property
    def record_path(self) -> Path:
        return self.root / "run.json"

    def prepare(self) -> None:
        try:
            for folder in (self.root, self.logs, self.ca_dir):
                folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot make the state directory {self.root}: {exc.strerror}; "
                f"set {STATE_VARIABLE} to a folder you can write"
            ) from exc

    def read(self) -> RunRecord | None:
        try:
            data = json.loads(self.record_path.read_text())
            return RunRecord.from_dict(data)
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            return None  # a torn or foreign file says nothing that runs

    def running(self) -> RunRecord | None:
        """The record of an ``up`` whose supervisor still runs, or None."""
        record = self.read()
        if record is None or not alive(record.supervisor):
            return None
        return record

    def write(self, record: RunRecord) -> None:
        partial = self.record_path.with_suffix(".json.partial")
        partial.write_text(json.dumps(record.as_dict(), indent=2) + "\n")
        partial.replace(self.record_path)  # a reader sees the old record or the new, whole

    def clear(self, supervisor: int) -> None:
        record = self.read()
        if record is not None and record.supervisor == supervisor:
            self.record_path.unlink(missing_ok=True)
