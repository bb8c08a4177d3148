"""The interface watcher's sans-IO parts (m2mc.transport.linkwatch): rtnetlink messages
decoded from bytes made here, the state that says when an interface is back, and the
one that follows an interface's address (infrastructure uplinks). The kernel side runs
in tests/netns/test_adhoc_linkwatch.py and tests/netns/test_infra_iface.py."""

from __future__ import annotations

import socket
import struct

from hypothesis import given
from hypothesis import strategies as st

from m2mc.transport.channel import Channel
from m2mc.transport.linkwatch import (
    IFF_RUNNING,
    IFF_UP,
    RTM_DELADDR,
    RTM_NEWADDR,
    RTM_NEWLINK,
    AddressState,
    LinkChange,
    LinkMessage,
    LinkState,
    parse_messages,
)
from m2mc.transport.url import open_channel

UP = IFF_UP | IFF_RUNNING


def rtattr(kind: int, data: bytes) -> bytes:
    length = 4 + len(data)
    return struct.pack("=HH", length, kind) + data + bytes(-length % 4)


def nlmsg(kind: int, body: bytes) -> bytes:
    return struct.pack("=IHHII", 16 + len(body), kind, 0, 0, 0) + body + bytes(-len(body) % 4)


def link(index: int, flags: int, name: str, kind: int = RTM_NEWLINK) -> bytes:
    return nlmsg(kind, struct.pack("=BxHiII", 0, 1, index, flags, 0)
                 + rtattr(3, name.encode() + b"\0"))


def addr(index: int, address: str, kind: int = RTM_NEWADDR) -> bytes:
    raw = socket.inet_aton(address)
    return nlmsg(kind, struct.pack("=BBBBi", socket.AF_INET, 24, 0, 0, index)
                 + rtattr(1, raw) + rtattr(2, raw))


def test_link_and_address_messages_are_decoded() -> None:
    data = link(3, UP, "eth0") + addr(3, "10.77.0.4") + addr(3, "10.77.0.4", RTM_DELADDR)
    assert parse_messages(data) == [
        LinkMessage("link", 3, UP, "eth0"), LinkMessage("addr", 3, address="10.77.0.4"),
        LinkMessage("deladdr", 3, address="10.77.0.4")]


def test_a_change_named_by_its_string_is_the_same_change() -> None:
    """``LinkChange`` is a StrEnum: a message built with the plain string (a test, a
    caller of its own) is read as the member, not silently ignored."""
    state = LinkState(3, "eth0", None)
    state.feed(LinkMessage("dellink", 3))
    assert not state.usable  # gone
    state.feed(LinkMessage("link", 3, UP, "eth0"))
    assert state.usable  # up and running again
    assert LinkMessage("addr", 3).kind == LinkChange.ADDR


@given(st.binary(max_size=300))
def test_garbage_never_raises(data: bytes) -> None:
    parse_messages(data)
    parse_messages(link(1, UP, "x") + data)


def feed(state: LinkState, *messages: bytes) -> list[bool]:
    return [state.feed(m) for data in messages for m in parse_messages(data)]


def test_an_interface_is_back_when_up_running_and_holding_its_address() -> None:
    state = LinkState(3, "eth0", "10.77.0.4")
    assert state.usable
    assert feed(state, link(3, 0, "eth0")) == [False]  # ip link set eth0 down
    assert feed(state, link(3, IFF_UP, "eth0")) == [False]  # up, no carrier yet
    assert feed(state, link(3, UP, "eth0")) == [True]  # carrier: back
    assert feed(state, link(3, UP, "eth0")) == [False]  # news of the same state
    assert feed(state, addr(3, "10.77.0.9", RTM_DELADDR)) == [False]  # another address
    assert feed(state, addr(3, "10.77.0.4", RTM_DELADDR), addr(3, "10.77.0.4")) == [False, True]
    assert feed(state, link(5, 0, "eth1"), addr(5, "10.77.0.4")) == [False, False]  # others
    assert state.returns == 2


def test_an_interface_made_again_is_followed_by_name() -> None:
    state = LinkState(3, "wlan0", None)  # watched by name: any address will do
    assert feed(state, link(3, 0, "wlan0", kind=17)) == [False]  # RTM_DELLINK: unplugged
    assert feed(state, link(7, UP, "wlan0")) == [True]  # plugged in again, a new index
    assert state.index == 7
    assert feed(state, addr(7, "192.0.2.1", RTM_DELADDR), addr(7, "192.0.2.8")) == [False, True]


async def test_channels_without_an_interface_have_no_signal() -> None:
    channel = open_channel("mem://linkwatch")
    async with channel:
        assert channel.watch_link(lambda: None) is False
    assert Channel.watch_link(channel, lambda: None) is False


def follow(state: AddressState, *messages: bytes) -> list[bool]:
    return [state.feed(m) for data in messages for m in parse_messages(data)]


def test_a_followed_address_moves_when_a_renewal_replaces_it() -> None:
    state = AddressState(3, "wlan0", "10.78.0.4")
    assert state.usable and state.current == "10.78.0.4"
    # DHCP to another address: the old one goes (nothing left), then the new one comes
    assert follow(state, addr(3, "10.78.0.4", RTM_DELADDR)) == [True]
    assert state.current is None and not state.usable
    assert follow(state, addr(3, "10.78.0.104")) == [True]
    assert state.current == "10.78.0.104" and state.usable and state.moves == 2
    assert follow(state, addr(3, "10.78.0.104")) == [False]  # a lease renewed in place


def test_a_roam_that_adds_before_it_removes_moves_once_when_the_old_address_goes() -> None:
    state = AddressState(3, "wlan0", "10.78.0.2")
    assert follow(state, addr(3, "10.78.0.102")) == [False]  # the old one still works
    assert state.current == "10.78.0.2" and state.addresses == ["10.78.0.2", "10.78.0.102"]
    assert follow(state, addr(3, "10.78.0.102", RTM_DELADDR)) == [False]  # not the one used
    assert follow(state, addr(3, "10.78.0.102"), addr(3, "10.78.0.2", RTM_DELADDR)) == [
        False, True]
    assert state.current == "10.78.0.102" and state.moves == 1


def test_the_same_address_back_is_no_move_but_the_interface_is_back() -> None:
    state = AddressState(3, "wlan0", "10.78.0.4")
    assert follow(state, link(3, 0, "wlan0")) == [False]  # down: the address stays
    assert follow(state, link(3, UP, "wlan0")) == [True]  # back (join the groups again)
    assert follow(state, addr(3, "10.78.0.4", RTM_DELADDR), addr(3, "10.78.0.4")) == [
        True, True]  # gone (None), then back where it was
    assert state.current == "10.78.0.4"
    assert follow(state, addr(5, "10.78.0.9"), link(5, UP, "eth1")) == [False, False]  # others


def test_an_interface_made_again_starts_with_no_address() -> None:
    state = AddressState(3, "wlan0", "10.78.0.4")
    assert follow(state, link(3, 0, "wlan0", kind=17)) == [True]  # unplugged: no address
    assert state.current is None
    assert follow(state, link(7, UP, "wlan0"), addr(7, "10.78.0.7")) == [False, True]
    assert state.index == 7 and state.current == "10.78.0.7"


def test_a_fresh_look_replaces_what_was_known() -> None:
    state = AddressState(3, "wlan0", "10.78.0.4")
    assert state.reset(["10.78.0.4", "192.0.2.1"]) is False  # the same, and one more
    assert state.reset(["192.0.2.1"]) is True and state.current == "192.0.2.1"
    assert state.reset([]) is True and state.current is None
    assert state.reset(["198.51.100.1", "198.51.100.1"]) is True
    assert state.addresses == ["198.51.100.1"]


@given(st.lists(st.tuples(st.sampled_from(["addr", "deladdr", "link", "dellink"]),
                          st.sampled_from([3, 4]), st.sampled_from(["a", "b", "c"]),
                          st.booleans())))
def test_the_followed_address_is_always_one_the_interface_holds(
        events: list[tuple[str, int, str, bool]]) -> None:
    state = AddressState(3, "wlan0", "10.0.0.1")
    for kind, index, which, up in events:
        address = {"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.0.3"}[which]
        name = "wlan0" if index == 3 or up else "eth1"
        before = state.current
        changed = state.feed(LinkMessage(kind, index, UP if up else 0, name, address))
        assert state.current is None or state.current in state.addresses
        assert state.current == (state.addresses[0] if before not in state.addresses
                                 and state.addresses else state.current)
        if state.current != before:
            assert changed
