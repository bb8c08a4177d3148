"""Channel URLs of docs/interfaces.md §2: what parses, what fails, with one-line errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.errors import ConfigError
from m2mc.transport.url import (
    DEFAULT_CHANNEL_URL,
    DEFAULT_RCVBUF,
    DaemonSpec,
    MemSpec,
    MulticastSpec,
    NullSpec,
    UdpSpec,
    channel_on_iface,
    format_channel_url,
    is_iface_name,
    open_channel,
    parse_channel_url,
)


def test_contract_default_multicast_url() -> None:
    assert DEFAULT_CHANNEL_URL == "udp-multicast://239.255.77.77:7777?iface=127.0.0.1&ttl=1"
    assert parse_channel_url(DEFAULT_CHANNEL_URL) == MulticastSpec("239.255.77.77", 7777,
                                                                   "127.0.0.1", 1)


@pytest.mark.parametrize(("url", "spec"), [
    ("udp-multicast://239.255.1.2:5000", MulticastSpec("239.255.1.2", 5000, "127.0.0.1", 1)),
    ("udp-multicast://239.255.1.2:5000?ttl=0", MulticastSpec("239.255.1.2", 5000, ttl=0)),
    ("udp://127.0.0.1:5000", UdpSpec((("127.0.0.1", 5000),))),
    ("udp://127.0.0.1:5000,localhost:5001?bind=127.0.0.1:5002",
     UdpSpec((("127.0.0.1", 5000), ("127.0.0.1", 5001)), ("127.0.0.1", 5002))),
    ("daemon://127.0.0.1:5678", DaemonSpec("127.0.0.1", 5678)),
    ("daemon://127.0.0.1", DaemonSpec("127.0.0.1", 5678)),
    ("mem://bus-1", MemSpec("bus-1")),
    ("null://", NullSpec()),
])
def test_valid_urls(url: str, spec: object) -> None:
    assert parse_channel_url(url) == spec
    assert parse_channel_url(format_channel_url(parse_channel_url(url))) == spec


@pytest.mark.parametrize(("url", "fault"), [
    ("", "SCHEME://"),
    ("tcp://127.0.0.1:1", "unknown scheme"),
    ("udp-multicast://127.0.0.1:5000", "not a multicast group"),
    ("udp-multicast://239.255.1.2:70000", "port must be"),
    ("udp-multicast://239.255.1.2:5000?ttl=300", "ttl must be"),
    ("udp-multicast://239.255.1.2:5000?ttl=x", "ttl must be an integer"),
    ("udp-multicast://239.255.1.2:5000?iface=10.0.0.256", "iface must be an IPv4 address"),
    ("udp-multicast://239.255.1.2:5000?iface=127.1", "iface must be an IPv4 address"),
    ("udp-multicast://239.255.1.2:5000?iface=", "iface is empty"),
    ("udp-multicast://239.255.1.2:5000?iface=eth%200", "neither an IPv4 address nor"),
    ("udp-multicast://239.255.1.2:5000?iface=wlan0/1", "neither an IPv4 address nor"),
    ("udp-multicast://239.255.1.2:5000?iface=..", "iface must be an IPv4 address"),
    ("udp-multicast://239.255.1.2:5000?iface=eth%C3%A9", "neither an IPv4 address nor"),
    ("udp-multicast://239.255.1.2:5000?iface=averyveryverylong0", "too long"),
    ("udp-multicast://239.255.1.2:5000?iface=fe80::1", "IPv6 address; m2mc channels are IPv4"),
    ("udp-multicast://[ff02::1]:5000", "IPv6 address; m2mc channels are IPv4"),
    ("udp-multicast://ff02::1", "IPv6 address"),
    ("udp://[::1]:5000", "IPv6 address"),
    ("udp://127.0.0.1:5000?bind=[::1]:0", "IPv6 address"),
    ("daemon://[::1]:5678", "IPv6 address"),
    ("udp-multicast://239.255.1.2:5000?colour=red", "unexpected parameter"),
    ("udp-multicast://239.255.1.2:5000?ttl=1&ttl=2", "given twice"),
    ("udp://", "at least one"),
    ("udp://127.0.0.1", "HOST:PORT"),
    ("udp://239.255.1.2:5000", "use udp-multicast"),
    ("daemon://127.0.0.2:0", "1..65535"),
    ("mem://", "NAME"),
    ("mem://a b", "NAME"),
    ("null://x", "no address"),
])
def test_invalid_urls_raise_one_line_config_error(url: str, fault: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_channel_url(url)
    message = str(caught.value)
    assert fault in message and repr(url) in message and "\n" not in message


@pytest.mark.parametrize("name", ["eth0", "wlan0", "lo", "lo0", "wlp2s0", "enp0s31f6",
                                  "br-1a2b3c4d5e6f", "eth0.100", "ethernet_32768", "tailscale0"])
def test_iface_names_parse_and_round_trip_exactly(name: str) -> None:
    url = f"udp-multicast://239.255.1.2:5000?iface={name}&ttl=1"
    spec = parse_channel_url(url)
    assert spec == MulticastSpec("239.255.1.2", 5000, name, 1)
    assert format_channel_url(spec) == url
    assert is_iface_name(name) and not is_iface_name("10.1.2.3")


@settings(deadline=None)
@given(st.from_regex(r"[A-Za-z_\-][A-Za-z0-9_.\-]{0,14}", fullmatch=True)
       .filter(lambda n: n not in (".", "..")),
       st.integers(0, 255), st.integers(1, 65535), st.sampled_from([1 << 20, DEFAULT_RCVBUF]))
def test_any_well_formed_name_round_trips(name: str, ttl: int, port: int, rcvbuf: int) -> None:
    spec = MulticastSpec("239.255.3.4", port, name, ttl % 256, rcvbuf)
    url = format_channel_url(spec)
    assert parse_channel_url(url) == spec and format_channel_url(parse_channel_url(url)) == url


def test_parsing_a_name_opens_no_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_sockets(*args: object, **kwargs: object) -> None:
        raise AssertionError("parsing must not open a socket")

    monkeypatch.setattr("socket.socket", no_sockets)
    monkeypatch.setattr("socket.if_nametoindex", no_sockets)
    assert parse_channel_url("udp-multicast://239.255.1.2:5000?iface=nosuch0&ttl=1") == \
        MulticastSpec("239.255.1.2", 5000, "nosuch0", 1)


def test_channel_on_iface_replaces_the_iface_and_keeps_the_rest() -> None:
    url = "udp-multicast://239.255.1.2:5000?iface=127.0.0.1&ttl=0&rcvbuf=65536"
    assert channel_on_iface(url, "eth0") == \
        "udp-multicast://239.255.1.2:5000?iface=eth0&ttl=0&rcvbuf=65536"
    assert channel_on_iface(url, "10.1.2.3") == \
        "udp-multicast://239.255.1.2:5000?iface=10.1.2.3&ttl=0&rcvbuf=65536"
    assert channel_on_iface(url, "127.0.0.1") == url
    with pytest.raises(ConfigError, match="applies to udp-multicast"):
        channel_on_iface("daemon://127.0.0.1:5678", "eth0")
    with pytest.raises(ConfigError, match="too long"):
        channel_on_iface(url, "x" * 16)


def test_daemon_must_be_local() -> None:
    with pytest.raises(ConfigError, match=r"127\.0\.0\.0/8"):
        parse_channel_url("daemon://239.1.1.1:5678")


@settings(deadline=None)  # shared 2-core CI machines: no per-example deadline
@given(st.integers(0, 255), st.integers(0, 255), st.integers(1, 65535), st.integers(0, 255))
def test_multicast_round_trip(c: int, d: int, port: int, ttl: int) -> None:
    spec = MulticastSpec(f"239.255.{c}.{d}", port, "127.0.0.1", ttl)
    assert parse_channel_url(format_channel_url(spec)) == spec


@pytest.mark.parametrize(("url", "loops_back"), [
    ("udp-multicast://239.255.1.2:5000", True), ("udp://127.0.0.1:5000", False),
    ("daemon://127.0.0.1:5678", True), ("mem://x", True), ("null://", False),
])
def test_open_channel_gives_the_right_kind(url: str, loops_back: bool) -> None:
    channel = open_channel(url)
    assert channel.loops_back is loops_back and channel.url == url
