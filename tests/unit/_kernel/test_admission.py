"""What the admission gate closes when room is needed (issue 31, item 6): a connection that
has sent nothing goes before a handshake under way, the most crowded address's first; one
address past its cap loses its own oldest handshake, or the newcomer is refused. The gate over
real sockets and real TLS is tests/integration/test_connection_admission.py."""

from __future__ import annotations

import ssl

from ankka._kernel.admission import Admission, AdmissionLimits


class _Gate:
    """Stands in for the gate's bookkeeping side: an address, silent or not, evictable."""

    def __init__(self, admission: Admission, source: str, *, silent: bool) -> None:
        self.admission = admission
        self.source = source
        self.silent = silent
        self.counted = False
        self.evicted = False

    def evict(self) -> None:
        self.evicted = True
        self.admission.release(self)  # type: ignore[arg-type]


def _admission(**limits: int) -> Admission:
    return Admission(AdmissionLimits(**limits), ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))


def _admit(admission: Admission, source: str, *, silent: bool) -> _Gate:
    gate = _Gate(admission, source, silent=silent)
    assert admission.admit(gate)  # type: ignore[arg-type]
    return gate


def test_a_silent_connection_goes_before_a_handshake_under_way() -> None:
    admission = _admission(max_handshakes=3)
    client = _admit(admission, "10.0.0.1", silent=False)
    crowd = [_admit(admission, "10.0.0.9", silent=True) for _ in range(2)]

    _admit(admission, "10.0.0.1", silent=False)

    assert not client.evicted
    assert [g.evicted for g in crowd] == [True, False], "the crowd's oldest silent one went"
    assert len(admission.handshakes) == 3


def test_with_none_silent_the_most_crowded_address_loses_its_oldest() -> None:
    admission = _admission(max_handshakes=3)
    lone = _admit(admission, "10.0.0.1", silent=False)
    busy = [_admit(admission, "10.0.0.2", silent=False) for _ in range(2)]

    _admit(admission, "10.0.0.3", silent=False)

    assert not lone.evicted
    assert [g.evicted for g in busy] == [True, False]


def test_an_address_past_its_cap_loses_its_own_oldest_handshake_or_the_newcomer() -> None:
    admission = _admission(max_connections_per_source=2)
    first, second = (_admit(admission, "10.0.0.1", silent=True) for _ in range(2))

    _admit(admission, "10.0.0.1", silent=True)
    assert first.evicted and not second.evicted

    for gate in list(admission.handshakes):
        admission.established(gate)  # every one is past its handshake now
    refused = _Gate(admission, "10.0.0.1", silent=True)
    assert not admission.admit(refused)  # type: ignore[arg-type]
    assert admission.refused == 1
    assert admission.admit(_Gate(admission, "10.0.0.2", silent=True))  # type: ignore[arg-type]


def test_a_place_is_given_back_once() -> None:
    admission = _admission()
    gate = _admit(admission, "10.0.0.1", silent=True)

    admission.release(gate)  # type: ignore[arg-type]
    admission.release(gate)  # type: ignore[arg-type]

    assert admission.per_source == {} and admission.handshakes == {}
