"""What ankka remembers about starting llama-server on this machine, so a start that needed
``--no-repack`` once goes straight to it the next time (no crash, no second start).

One small JSON file per (server program, CPU flags, kernel release) under
``<cache>/llama-server/``: another build, another CPU or another kernel (which may grant what
this one refused) is a fresh try. Files are written atomically (a temporary file renamed over
the old one), so two starts at once never read half a file; a file that cannot be read is
ignored (then every way is tried again, in order). Deleting the folder forgets everything.

Called by :func:`ankka.local.local_model.start`. :func:`machine_key` and :func:`cpu_flags`
are pure; :func:`recall`, :func:`remember` and :func:`forget` are the I/O.
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

__all__ = [
    "Remembered",
    "cpu_flags",
    "forget",
    "machine_key",
    "read_cpu_flags",
    "recall",
    "record_path",
    "remember",
]


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
    record = {
        "way": way,
        "because": because,
        "program": str(program),
        "kernel": platform.release(),
        "recorded_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)  # atomic: a concurrent start reads the old record or the new one
    return Remembered(way, because, path)


def forget(cache: Path, key: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        record_path(cache, key).unlink()
