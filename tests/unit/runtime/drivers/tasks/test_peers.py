"""The settings of delegation across runtimes: ``ANKKA_PEERS`` and ``ANKKA_DELEGATORS``."""

from __future__ import annotations

import pytest

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.drivers.tasks.peers import Peer, check_peers, peers_from_environment
from ankka.runtime.drivers.tasks.remote import PeerAnswered, outcome_after_creation
from ankka.runtime.serve.cli import delegators_from


def test_peers_are_read_from_a_json_object_of_agents() -> None:
    env = {
        "ANKKA_PEERS": '{"researcher": {"url": "https://researcher.team.svc:443", '
        '"identity": "ankka://service/team/researcher"}}'
    }
    assert peers_from_environment(env) == {
        "researcher": Peer(
            agent="researcher",
            url="https://researcher.team.svc:443",
            identity="ankka://service/team/researcher",
        )
    }
    assert peers_from_environment({}) == {}


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("[1]", "not an object"),
        ("{", "Expecting"),
        ('{"r": {"url": "ftp://x"}}', "url"),
        ('{"r": {"url": "http://x", "secret": 1}}', "secret"),
    ],
)
def test_a_bad_peers_value_is_refused_naming_what_is_wrong(value: str, named: str) -> None:
    with pytest.raises(ConfigurationError, match="ANKKA_PEERS") as caught:
        peers_from_environment({"ANKKA_PEERS": value})
    assert named in str(caught.value)


def test_delegators_are_callers_separated_by_commas_or_spaces() -> None:
    assert delegators_from({"ANKKA_DELEGATORS": "team/lead, team/other  x"}) == {
        "team/lead",
        "team/other",
        "x",
    }
    assert delegators_from({}) == frozenset()


def test_an_https_peer_called_with_the_runtimes_certificate_must_name_its_identity() -> None:
    bare = {"r": Peer(agent="r", url="https://r.team.svc:443")}
    with pytest.raises(ConfigurationError, match="identity"):
        check_peers(bare, "/etc/ankka/tls")
    check_peers(bare, None)  # no certificate of its own: the system's CAs check the peer
    named = {"r": Peer(agent="r", url="https://r.team.svc:443", identity="ankka://service/t/r")}
    check_peers(named, "/etc/ankka/tls")


@pytest.mark.parametrize(
    ("status", "error"), [(404, "peer_lost"), (403, "peer_error"), (422, "peer_error")]
)
def test_a_4xx_about_a_child_the_peer_made_is_a_failure_naming_the_status(
    status: int, error: str
) -> None:
    answered = PeerAnswered(status, "reading it", "no such task")
    told = outcome_after_creation(answered, task="r1:1.0", agent="researcher", iterations=3)
    assert (told.status, told.task, told.agent, told.error) == (
        "failed", "r1:1.0", "researcher", error,
    )  # fmt: skip
    assert told.reason is not None
    assert f"reading it with {status}" in told.reason and "no such task" in told.reason
    assert "(3 iterations)" in told.reason
    assert told.is_error and "refused" not in told.reason
