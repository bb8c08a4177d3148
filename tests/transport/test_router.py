"""The daemon's sans-IO routing rule (seeds/002 section 1, Figure 1) and its frame codec."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.transport.frames import FrameDecoder, encode_frame
from m2mc.transport.router import DaemonRouter, Route
from m2mc.wire.packet import MAX_DATAGRAM, fragments

PACKET = next(fragments(77, b"hello"))


def join(router: DaemonRouter) -> int:
    client = router.connect()
    assert client is not None
    return client


def test_from_a_local_process_to_every_local_process_and_the_network() -> None:
    router = DaemonRouter(external_loops_back=False)
    a, b, c = join(router), join(router), join(router)
    assert router.from_client(a, PACKET, 0.0) == Route(PACKET, (a, b, c), True)
    # the sender is included: that copy is its loopback, discarded by its M2MP layer


def test_from_the_network_to_every_local_process_only() -> None:
    router = DaemonRouter(external_loops_back=False)
    a, b = join(router), join(router)
    assert router.from_network(PACKET, 0.0) == Route(PACKET, (a, b), False)
    router.disconnect(a)
    assert router.from_network(PACKET, 0.0) == Route(PACKET, (b,), False)


def test_own_sends_looped_back_by_the_network_are_dropped_once_per_copy() -> None:
    router = DaemonRouter(external_loops_back=True, loopback_ttl=1.0)
    a = join(router)
    router.from_client(a, PACKET, 0.0)
    router.from_client(a, PACKET, 0.0)  # redundancy 2: two copies out
    assert router.from_network(PACKET, 0.1) is None
    assert router.from_network(PACKET, 0.1) is None
    assert router.from_network(PACKET, 0.1) == Route(PACKET, (a,), False)  # someone else's
    assert router.stats.own_loopback == 2 and router.expected_loopbacks == 0


def test_expected_loopbacks_expire_and_are_bounded() -> None:
    router = DaemonRouter(external_loops_back=True, loopback_ttl=1.0, max_loopback_entries=10)
    a = join(router)
    router.from_client(a, PACKET, 0.0)
    assert router.from_network(PACKET, 2.0) is not None  # expired: a stranger's copy
    for number in range(100):
        router.from_client(a, next(fragments(number, b"x")), 3.0)
    assert router.expected_loopbacks == 10


def test_malformed_datagrams_are_dropped_and_counted() -> None:
    router = DaemonRouter(external_loops_back=False)
    a = join(router)
    assert router.from_client(a, b"short", 0.0) is None
    assert router.from_network(bytes(MAX_DATAGRAM + 1), 0.0) is None
    assert router.from_network(bytes(1472), 0.0) is not None  # a larger packet size: relayed
    assert router.stats.malformed == 2


def test_client_bound() -> None:
    router = DaemonRouter(external_loops_back=False, max_clients=2)
    assert router.connect() is not None and router.connect() is not None
    assert router.connect() is None
    assert router.stats.clients_refused == 1


@settings(deadline=None)  # shared 2-core CI machines: no per-example deadline
@given(st.lists(st.binary(max_size=600), max_size=20), st.lists(st.integers(1, 50), max_size=40))
def test_frames_survive_any_split_of_the_stream(datagrams: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(d) for d in datagrams)
    decoder = FrameDecoder()
    got: list[bytes] = []
    position = 0
    for cut in cuts:
        got += decoder.feed(stream[position:position + cut])
        position += cut
    got += decoder.feed(stream[position:])
    assert got == datagrams and decoder.buffered == 0
