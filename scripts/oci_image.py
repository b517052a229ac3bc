"""Pack layer tars into an OCI image-layout tar that ``ctr images import`` takes.

Used by ``scripts/image.sh``; the layers are plain (uncompressed) tars, so each layer's digest
is also its diff ID. The image is named by the ``io.containerd.image.name`` annotation (and
``org.opencontainers.image.ref.name``), which containerd's import uses as the image's name.

    python scripts/oci_image.py --name localhost/ankka/ankka:0.1.0 --out ankka.oci.tar \\
        --config '{"User": "10001:10001", "Cmd": ["ankka"]}' base.tar deps.tar ankka.tar
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def _blob(data: bytes) -> tuple[str, bytes]:
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def pack(name: str, out: Path, config: dict[str, Any], layers: list[Path]) -> str:
    """Write the archive; returns the manifest's digest."""
    layer_digests = [_sha256(p) for p in layers]
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": layer_digests},
        "history": [{"created_by": f"scripts/image.sh: {p.name}"} for p in layers],
    }
    config_digest, config_bytes = _blob(json.dumps(image_config, sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": len(config_bytes),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": digest,
                "size": path.stat().st_size,
            }
            for digest, path in zip(layer_digests, layers, strict=True)
        ],
    }
    manifest_digest, manifest_bytes = _blob(json.dumps(manifest, sort_keys=True).encode())
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": manifest["mediaType"],
                "digest": manifest_digest,
                "size": len(manifest_bytes),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
                },
            }
        ],
    }
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(tmp, "w") as tar:
        _add_bytes(tar, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        _add_bytes(tar, "index.json", json.dumps(index).encode())
        for digest, data in ((config_digest, config_bytes), (manifest_digest, manifest_bytes)):
            _add_bytes(tar, f"blobs/sha256/{digest.split(':', 1)[1]}", data)
        for digest, path in zip(layer_digests, layers, strict=True):
            tar.add(str(path), arcname=f"blobs/sha256/{digest.split(':', 1)[1]}")
    os.replace(tmp, out)
    return manifest_digest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", required=True, help="e.g. localhost/ankka/ankka:0.1.0")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--config", required=True, help="the image config's 'config' as JSON")
    parser.add_argument("layers", type=Path, nargs="+")
    args = parser.parse_args(argv)
    digest = pack(args.name, args.out, json.loads(args.config), args.layers)
    print(f"{args.out}: {args.name} {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
