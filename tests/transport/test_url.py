"""Channel URLs of CONTRACTS section 2: what parses, what fails, with one-line errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.errors import ConfigError
from m2mc.transport.url import (
    DEFAULT_CHANNEL_URL,
    DaemonSpec,
    MemSpec,
    MulticastSpec,
    NullSpec,
    UdpSpec,
    format_channel_url,
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
    ("udp-multicast://239.255.1.2:5000?iface=eth0", "iface must be an IPv4 address"),
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
