"""A private PostgreSQL cluster for the tests, started from Debian's server binaries.

Each test session gets its own cluster in a temporary directory on a free loopback port, so
the tests need no system service and leave nothing behind. PostgreSQL refuses to run as root,
so as root the cluster runs as the ``postgres`` user. Missing binaries fail loudly with the
command that installs them; the tier never skips.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["client_tool", "postgres_cluster"]

INSTALL = "apt-get install -y postgresql (.ci/run does this)"


def _binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise RuntimeError(f"PostgreSQL's server is not installed (no initdb found): {INSTALL}")


def client_tool(name: str) -> Path:
    """One of PostgreSQL's client programs (``psql``, ``pg_dump``) beside the server's."""
    return _binaries() / name


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def postgres_cluster(
    *,
    fsync: bool = False,
    listen: str = "127.0.0.1",
    password: str | None = None,
    networks: tuple[str, ...] = (),
) -> Iterator[str]:
    """Start a throwaway cluster; yield its DSN; stop and remove it afterwards. Tests run it
    with ``fsync=off``; benchmarks that claim durability pass ``fsync=True``. ``listen`` adds
    an address to listen on, and ``networks`` admit clients from those networks with
    ``password`` (scram-sha-256; the pods tier's pods, inside its network namespace); loopback
    stays trusted, and the DSN yielded is loopback's."""
    bindir = _binaries()
    base = Path(tempfile.mkdtemp(prefix="ankka-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data = base / "data"

    def run(*command: str) -> None:
        finished = subprocess.run(
            [*as_user, *command], capture_output=True, text=True, timeout=120, check=False
        )
        if finished.returncode != 0:
            log = (base / "log").read_text() if (base / "log").exists() else ""
            raise RuntimeError(
                f"{' '.join(command)} failed ({finished.returncode}):\n"
                f"{finished.stdout}{finished.stderr}{log}"
            )

    port = _free_port()
    run(
        str(bindir / "initdb"),
        "-D",
        str(data),
        "-U",
        "ankka",
        "--auth=trust",
        "-E",
        "UTF8",
        "--no-sync",
    )
    hba = data / "pg_hba.conf"
    if networks:
        with hba.open("a") as rules:
            for network in networks:
                rules.write(f"host all all {network} scram-sha-256\n")
    addresses = "127.0.0.1" if listen == "127.0.0.1" else f"127.0.0.1,{listen}"
    options = f"-p {port} -k {base} -c listen_addresses={addresses}"
    if not fsync:
        options += " -c fsync=off"
    run(
        str(bindir / "pg_ctl"),
        "-D",
        str(data),
        "-o",
        options,
        "-l",
        str(base / "log"),
        "-w",
        "-t",
        "60",
        "start",
    )
    try:
        if password is not None:
            run(
                str(bindir / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "ankka",
                "-d", "postgres", "-c", f"ALTER ROLE ankka PASSWORD '{password}'",
            )  # fmt: skip
        yield f"postgresql://ankka@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(base, ignore_errors=True)
