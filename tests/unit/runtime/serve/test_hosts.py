"""Which Host the runtime answers (ankka.runtime.serve.hosts), as a pure rule."""

from __future__ import annotations

import pytest

from ankka.runtime.serve.hosts import allowed_hosts, host_problem

GIVEN = allowed_hosts(["Agents.Example.com."], "https://public.example.org:8443/base")


@pytest.mark.parametrize(
    "host",
    [
        None,
        "127.0.0.1:8000",
        "10.1.2.3",
        "[::1]:8000",
        "localhost",
        "LOCALHOST:9",
        "app.localhost:80",
        "runtime",
        "shop.agents.svc",
        "shop.agents.svc.cluster.local:8000",
        "agents.example.com",
        "public.example.org:8443",
    ],
)
def test_served(host: str | None) -> None:
    assert host_problem(host, GIVEN) is None


@pytest.mark.parametrize(
    ("host", "named"),
    [
        ("evil.example:8000", "'evil.example'"),
        ("127.0.0.1.nip.io", "'127.0.0.1.nip.io'"),
        ("localhost.evil.example", "'localhost.evil.example'"),
        ("svc.evil.example", "'svc.evil.example'"),
        ("[::1", "does not name a host"),
        ("localhost:http", "does not name a host"),
        ("", "does not name a host"),
        ("a" * 300, "longer than 255"),
    ],
)
def test_refused_naming_the_host(host: str, named: str) -> None:
    problem = host_problem(host, GIVEN)
    assert problem is not None and named in problem
