"""The committed CRDs are exactly what ``ankka.api.resources`` generates."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ankka.api.crdgen import crd, render_all
from ankka.api.resources import Agent, InstallationModel

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("where", ["crds", "charts/ankka/crds"])
def test_committed_crds_match_the_models(where: str) -> None:
    rendered = render_all()
    assert sorted(p.name for p in (ROOT / where).glob("*.yaml")) == sorted(rendered)
    for name, text in rendered.items():
        assert (ROOT / where / name).read_text() == text, (
            f"{where}/{name} drifted; run: python -m ankka.api.crdgen"
        )


def test_schemas_are_structural_with_no_refs_or_unions() -> None:
    for name, text in render_all().items():
        for marker in ("$ref", "anyOf", "$defs"):
            assert marker not in text, name
        yaml.safe_load(text)


def test_server_kind_is_an_enum_and_status_is_a_subresource() -> None:
    version = crd(InstallationModel)["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["server"]["properties"]["kind"]["enum"] == [
        "ollama",
        "llamacpp",
        "vllm",
    ]
    assert version["subresources"] == {"status": {}}
    assert spec["x-kubernetes-validations"][0]["rule"] == "has(self.server) != has(self.endpoint)"


def test_agent_has_short_name_and_printer_columns() -> None:
    spec = crd(Agent)["spec"]
    assert spec["names"]["shortNames"] == ["ag"]
    columns = {c["name"] for c in spec["versions"][0]["additionalPrinterColumns"]}
    assert {"Phase", "ModelsServed"} <= columns
