"""Which ways one start of llama-server tries, and what ankka remembers about this machine, so
a start that needed ``--no-repack`` once goes straight to it the next time (no crash, no
second start).

:func:`plan` picks the ways (``--repack auto``: the remembered one first, then the others;
``on``/``off``: one way, forced, nothing read or written) and :func:`record` keeps what worked
and says how the server started.

One small JSON file per (server program, CPU flags, kernel release) under
``<cache>/llama-server/``: another build, another CPU or another kernel (which may grant what
this one refused) is a fresh try. Files are written atomically (a temporary file renamed over
the old one), so two starts at once never read half a file; a file that cannot be read is
ignored (then every way is tried again, in order). Deleting the folder forgets everything.

Called by :func:`ankka.local.local_model.start`. :func:`machine_key`, :func:`cpu_flags` and
:func:`repack_mode` are pure; :func:`recall`, :func:`remember`, :func:`forget` (and so
:func:`plan`, :func:`record`) are the I/O.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ankka._kernel.errors import ConfigurationError
from ankka.local import llama_fallback as fallback
from ankka.local.llama_fallback import Attempt, Way

__all__ = [
    "REPACK_MODES",
    "REPACK_VARIABLE",
    "Plan",
    "Remembered",
    "cpu_flags",
    "forget",
    "machine_key",
    "plan",
    "read_cpu_flags",
    "recall",
    "record",
    "record_path",
    "remember",
    "repack_mode",
]

# The setting that forces a way (``--repack`` on the command line wins).
REPACK_VARIABLE = "ANKKA_LLAMA_REPACK"
REPACK_MODES: dict[str, Way] = {"on": fallback.AS_BUILT, "off": fallback.NO_REPACK}


@dataclass(frozen=True, slots=True)
class Remembered:
    """The way that worked (a :class:`ankka.local.llama_fallback.Way`'s name), why, and
    where it is written."""

    way: str
    because: str
    path: Path


def cpu_flags(cpuinfo: str) -> str:
    """The CPU's flags from ``/proc/cpuinfo``'s text: the first ``flags`` line, sorted."""
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            return " ".join(sorted(set(value.split())))
    return ""


def read_cpu_flags(path: Path = Path("/proc/cpuinfo")) -> str:
    try:
        return cpu_flags(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return ""


def _identity(path: Path) -> str:
    try:
        info = path.stat()
    except OSError:
        return f"{path}:missing"
    return f"{path.resolve()}:{info.st_size}:{info.st_mtime_ns}"


def machine_key(programs: Iterable[Path], flags: str, kernel: str | None = None) -> str:
    """A short name for this (programs as installed, CPU flags, kernel release)."""
    kernel = platform.release() if kernel is None else kernel
    parts = [*(_identity(p) for p in programs), flags, kernel]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def record_path(cache: Path, key: str) -> Path:
    return cache / "llama-server" / f"start-{key}.json"


def recall(cache: Path, key: str) -> Remembered | None:
    path = record_path(cache, key)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("way"), str):
        return None
    return Remembered(data["way"], str(data.get("because", "")), path)


def remember(cache: Path, key: str, *, way: str, because: str, program: Path) -> Remembered:
    path = record_path(cache, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {
        "way": way,
        "because": because,
        "program": str(program),
        "kernel": platform.release(),
        "recorded_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(entry, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)  # atomic: a concurrent start reads the old record or the new one
    return Remembered(way, because, path)


def forget(cache: Path, key: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        record_path(cache, key).unlink()


def repack_mode(value: str | None) -> str:
    """``auto`` (as built, then ``--no-repack`` if that dies of a crash signal, remembered per
    machine), ``on`` (as built only) or ``off`` (``--no-repack`` only); None means ``auto``."""
    mode = (value or "auto").strip().lower()
    if mode != "auto" and mode not in REPACK_MODES:
        raise ConfigurationError(
            f"repack must be auto, on or off (from --repack or {REPACK_VARIABLE}), not {value!r}"
        )
    return mode


@dataclass(frozen=True, slots=True)
class Plan:
    """The ways one start tries, in order, and what this machine's record says."""

    ways: tuple[Way, ...]
    mode: str
    key: str
    remembered: Remembered | None


def plan(cache: Path, programs: list[Path], mode: str) -> Plan:
    """The ways to try for ``programs`` on this machine in ``mode`` (see :func:`repack_mode`)."""
    key = machine_key(programs, read_cpu_flags())
    if mode != "auto":
        return Plan((REPACK_MODES[mode],), mode, key, None)
    remembered = recall(cache, key)
    return Plan(fallback.ways_to_try(remembered.way if remembered else None), mode, key, remembered)


def record(cache: Path, chosen: Plan, way: Way, failed: list[Attempt], program: Path) -> str:
    """Keep what worked for this machine (auto mode only) and say how the server started."""
    if chosen.mode != "auto":
        return f"{way.words}, as asked (--repack {chosen.mode} or {REPACK_VARIABLE})"
    if way is fallback.WAYS[0]:
        if chosen.remembered is not None:  # it was remembered otherwise; as built works now
            forget(cache, chosen.key)
        return fallback.fell_back_words(failed, way)
    if chosen.remembered is not None and chosen.remembered.way == way.name and not failed:
        return (
            f"{way.words}, as remembered for this machine ({chosen.remembered.because}; "
            f"delete {chosen.remembered.path} to try again as built)"
        )
    because = fallback.failed_words(failed)
    saved = remember(cache, chosen.key, way=way.name, because=because, program=program)
    return f"{fallback.fell_back_words(failed, way)}; remembered for this machine in {saved.path}"
