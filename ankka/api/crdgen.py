"""Generate the CustomResourceDefinitions in ``crds/`` from the pydantic resources.

Why: the CRDs' schemas must say exactly what ``ankka.api.resources`` says, or the API server
accepts what the operator cannot parse (or prunes what it needs). So they are generated, never
edited: ``python -m ankka.api.crdgen`` rewrites ``crds/`` and the chart's copy in
``charts/ankka/crds/`` (Helm installs only files inside the chart); ``--check`` exits 1 naming
each file that differs (``tests/unit/api/test_crds.py`` runs the same comparison).

Pydantic's JSON Schema is turned into a *structural* OpenAPI v3 schema: ``$ref`` inlined,
``Optional`` unwrapped (absent, not null), titles dropped, enums kept. Descriptions (what
``kubectl explain`` prints) come from the classes' and fields' docstrings, reflowed into
paragraphs, with reStructuredText's double backticks removed.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from ankka.api.resources import GROUP, VERSION, Agent, InstallationModel, Resource, Task, Team

__all__ = ["OUTPUTS", "RESOURCES", "crd", "main", "render_all", "structural"]

RESOURCES: tuple[type[Resource], ...] = (Agent, InstallationModel, Task, Team)

_DROP = {"title", "discriminator"}
OUTPUTS = (Path("crds"), Path("charts/ankka/crds"))


_LITERAL = re.compile(r"``([^`]+)``")


def describe(text: str) -> str:
    """A docstring as ``kubectl explain`` should print it: paragraphs on one line each."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip())]
    return _LITERAL.sub(r"\1", "\n\n".join(p for p in paragraphs if p))


def structural(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Turn one pydantic JSON Schema node into a structural OpenAPI v3 schema node."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        target = defs[schema["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return structural(merged, defs)
    any_of = schema.get("anyOf")
    if any_of is not None:
        branches = [b for b in any_of if b.get("type") != "null"]
        if len(branches) != 1:
            raise ValueError(f"cannot express a union of {len(branches)} types structurally")
        rest = {k: v for k, v in schema.items() if k != "anyOf"}
        return structural({**branches[0], **rest}, defs)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROP or key == "$defs":
            continue
        if key == "default" and value is None:
            continue
        if key == "description":
            out[key] = describe(value)
            continue
        if key == "properties":
            out[key] = {name: structural(sub, defs) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = structural(value, defs)
        elif key == "additionalProperties" and value is False:
            continue  # structural schemas prune unknown fields already
        else:
            out[key] = value
    if "const" in out:
        out["enum"] = [out.pop("const")]
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    if out.get("x-kubernetes-preserve-unknown-fields"):
        out["type"] = "object"
    return out


def _version_schema(resource: type[Resource]) -> dict[str, Any]:
    spec = structural(resource.spec_type.model_json_schema(by_alias=True))
    status = structural(resource.status_type.model_json_schema(by_alias=True))
    if resource.spec_rules:
        spec["x-kubernetes-validations"] = [
            {"rule": rule, "message": message} for rule, message in resource.spec_rules
        ]
    return {
        "description": describe(resource.__doc__ or ""),
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {
                "description": f"The API group and version: {GROUP}/{VERSION}.",
                "type": "string",
            },
            "kind": {"description": f"The resource's kind: {resource.kind}.", "type": "string"},
            # The API server allows nothing else here; kubectl explain shows ObjectMeta's docs.
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }


def crd(resource: type[Resource]) -> dict[str, Any]:
    """The CustomResourceDefinition of one resource, as a plain dict."""
    columns = [
        {
            "name": p.name,
            "type": p.type,
            "jsonPath": p.json_path,
            **({"priority": p.priority} if p.priority else {}),
        }
        for p in resource.printers
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{resource.plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": resource.kind,
                "listKind": f"{resource.kind}List",
                "plural": resource.plural,
                "singular": resource.kind.lower(),
                "shortNames": list(resource.short_names),
                "categories": ["ankka"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": _version_schema(resource)},
                }
            ],
        },
    }


_HEADER = "# Generated by `python -m ankka.api.crdgen` from ankka/api/resources.py. Do not edit.\n"


class _Plain(yaml.SafeDumper):
    """Writes a schema used twice (a SecretKeyRef) out twice: no YAML anchors in a CRD."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def render_all() -> dict[str, str]:
    """File name → YAML text, for every resource."""
    return {
        f"{r.plural}.{GROUP}.yaml": _HEADER
        + yaml.dump(crd(r), Dumper=_Plain, sort_keys=False, width=100)
        for r in RESOURCES
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ankka.api.crdgen", description=__doc__)
    parser.add_argument(
        "--out",
        type=Path,
        action="append",
        default=None,
        help="a directory to write (repeatable); default: crds and charts/ankka/crds",
    )
    parser.add_argument("--check", action="store_true", help="fail if the files differ")
    args = parser.parse_args(argv)
    outs: list[Path] = args.out or list(OUTPUTS)
    rendered = render_all()
    if args.check:
        stale = [o / n for o in outs for n, text in rendered.items() if _read(o / n) != text]
        for path in stale:
            print(f"{path} is stale; run: python -m ankka.api.crdgen", file=sys.stderr)
        return 1 if stale else 0
    for out in outs:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in rendered.items():
            (out / name).write_text(text)
    return 0


def _read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


if __name__ == "__main__":
    raise SystemExit(main())
