"""The image's dependency lock pins every dependency ankka declares, and those of the extras
the image carries: the operator's, what the documented examples need (an ``anthropic``
model, ``mcp`` servers' tools, the ``postgres`` store) and ``tracing`` (the image traces once
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set).

A dependency added to pyproject.toml but not to image/requirements.lock would be missing from
the image, and the pods tier would find out only at a pod's start; regenerate the lock with
``scripts/image.sh lock``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    found = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert found, requirement
    return re.sub(r"[-_.]+", "-", found.group(0)).lower()


def test_every_declared_dependency_is_pinned_in_the_image_lock() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    carried = ("operator", "anthropic", "mcp", "postgres", "tracing")
    declared = {_name(r) for r in project["dependencies"] + [r for e in carried for r in extras[e]]}
    assert "IMAGE_EXTRAS=" + ",".join(carried) in (ROOT / "scripts" / "image.sh").read_text()
    lines = (ROOT / "image" / "requirements.lock").read_text().splitlines()
    pins = [line for line in lines if line and not line.startswith("#")]
    assert all("==" in p for p in pins), [p for p in pins if "==" not in p]
    pinned = {_name(p) for p in pins}
    missing = sorted(declared - pinned)
    assert not missing, f"not in image/requirements.lock: {missing}; run scripts/image.sh lock"
