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
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

__all__ = ["Cluster", "client_tool", "postgres_cluster", "private_cluster"]

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


@dataclass(frozen=True)
class Cluster:
    """A running private cluster: its DSN, and its server stopped, started or restarted as
    an operator would (``pg_ctl``), for the tests of an outage."""

    dsn: str
    data: Path
    log: Path
    options: str
    as_user: tuple[str, ...]

    def _pg_ctl(self, *args: str) -> None:
        command = [*self.as_user, str(_binaries() / "pg_ctl"), "-D", str(self.data), *args]
        finished = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if finished.returncode != 0:
            raise RuntimeError(
                f"pg_ctl {' '.join(args)} failed ({finished.returncode}):\n"
                f"{finished.stdout}{finished.stderr}{self.log.read_text()}"
            )

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl("-m", mode, "-w", "stop")

    def start(self) -> None:
        self._pg_ctl("-o", self.options, "-l", str(self.log), "-w", "-t", "60", "start")

    def restart(self, mode: str = "fast") -> None:
        """``pg_ctl restart -m MODE``: every connection is cut, the server back when it
        returns."""
        self._pg_ctl(
            "-m", mode, "-o", self.options, "-l", str(self.log), "-w", "-t", "60", "restart"
        )


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
    with private_cluster(
        fsync=fsync, listen=listen, password=password, networks=networks
    ) as cluster:
        yield cluster.dsn


@contextmanager
def private_cluster(
    *,
    fsync: bool = False,
    listen: str = "127.0.0.1",
    password: str | None = None,
    networks: tuple[str, ...] = (),
) -> Iterator[Cluster]:
    """:func:`postgres_cluster`, yielding the :class:`Cluster` (to stop or restart it)."""
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
        yield Cluster(
            f"postgresql://ankka@127.0.0.1:{port}/postgres",
            data,
            base / "log",
            options,
            tuple(as_user),
        )
    finally:
        subprocess.run(
            [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(base, ignore_errors=True)


def fresh_database(server: str, prefix: str) -> str:
    """Create a database of its own (``prefix`` and a random suffix) on the PostgreSQL server
    at the DSN ``server``; return its DSN."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server.rsplit("/", 1)[0] + f"/{name}"
