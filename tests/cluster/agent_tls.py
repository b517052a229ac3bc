"""A runtime outside the cluster served with its Agent's own certificate, as a pod would be.

There is no kubelet in the cluster tier, so :class:`MountedSecret` does its part: it copies
the Agent's certificate Secret (``<agent>-tls``, the one the operator renders and renews) into a
directory laid out as Kubernetes mounts it, and copies it again whenever the operator renews
it, until it is stopped (the tier's certificates live 20 s). :func:`platform_client` is how a
test reads the runtime over mTLS: a client certificate of its own from the platform CA
(``ankka://platform/tests``), the runtime checked by that CA.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import ssl
import threading
from pathlib import Path

import httpx

from ankka.operator import certs
from tests.cluster.conftest import PLATFORM_NS, Kubectl
from tests.support.eventually import eventually

__all__ = ["MountedSecret", "platform_client"]

TESTS_URI = "ankka://platform/tests"


def _write(directory: Path, data: dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("tls.key", "tls.crt", "ca.crt"):  # each swapped in whole
        tmp = directory / f".{name}.tmp"
        tmp.write_bytes(base64.b64decode(data[name]))
        os.replace(tmp, directory / name)


class MountedSecret:
    """``with MountedSecret(kubectl, ns, secret, directory):`` keeps ``directory`` current."""

    def __init__(self, kubectl: Kubectl, namespace: str, name: str, directory: Path) -> None:
        self.kubectl = kubectl
        self.namespace = namespace
        self.name = name
        self.directory = directory
        self.copies = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._seen: str | None = None

    def _copy(self) -> bool:
        secret = self.kubectl.get("secret", self.name, self.namespace)
        data = (secret or {}).get("data") or {}
        if not {"tls.crt", "tls.key", "ca.crt"} <= set(data):
            return False
        if data["tls.crt"] != self._seen:
            _write(self.directory, data)
            self._seen = data["tls.crt"]
            self.copies += 1
        return True

    def _follow(self) -> None:
        while not self._stop.wait(1.0):  # until the fixture that made it ends
            self._copy()

    def __enter__(self) -> MountedSecret:
        eventually(self._copy, what=f"the Secret {self.namespace}/{self.name}", timeout=60)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def platform_client(
    kubectl: Kubectl,
    workdir: Path,
    *,
    check_hostname: bool = False,
    namespace: str = PLATFORM_NS,
    uri: str = TESTS_URI,
) -> httpx.Client:
    """An mTLS client as ``uri`` (``ankka://platform/tests``; an Agent's
    ``ankka://service/<ns>/<agent>`` to call the gateway as it), from the platform CA's Secret.

    With ``check_hostname`` the runtime's certificate must also name the host the request
    gives as ``extensions={"sni_hostname": "<agent>.<ns>.svc"}`` (a Service reached by IP)."""
    secret = kubectl.get("secret", "ankka-ca", namespace)
    assert secret is not None, "the operator has not created the platform CA"
    ca = certs.KeyPair(
        cert_pem=base64.b64decode(secret["data"]["tls.crt"]).decode(),
        key_pem=base64.b64decode(secret["data"]["tls.key"]).decode(),
    )
    pair = certs.issue(ca, uri=uri, now=dt.datetime.now(dt.UTC))
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "tests.crt").write_text(pair.cert_pem)
    (workdir / "tests.key").write_text(pair.key_pem)
    context = ssl.create_default_context(cadata=ca.cert_pem)
    context.check_hostname = check_hostname  # off: a runtime on 127.0.0.1 has the Service's names
    context.load_cert_chain(workdir / "tests.crt", workdir / "tests.key")
    return httpx.Client(verify=context, timeout=30)
