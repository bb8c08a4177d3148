"""The registry of decoders the fuzzer runs (bench/fuzz.py, tests/security).

A target takes arbitrary bytes and feeds them to one decoder of input that can
come from outside: the network (packets, group and infrastructure frames,
sealed messages, chat bodies, the daemon's stream) or the user (channel URLs).
A target either returns, or raises one of its ``expected`` error types (a
:class:`~m2mc.errors.DecodeError` unless stated). Anything else is a bug the
fuzzer reports. Stateful targets (reassembly, the M2MP layer, the frame
decoder) also check their bounds after every step and raise
:class:`BoundViolation` when one is exceeded.

Another layer adds its decoders by writing a provider (a function returning a
list of :class:`FuzzTarget`) and appending ``"module:function"`` to
:data:`PROVIDERS`. A provider whose module cannot be imported yet is listed as
unavailable rather than failing the run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgpack

from m2mc.errors import ConfigError, DecodeError

__all__ = ["PROVIDERS", "BoundViolation", "FuzzTarget", "load_targets"]


STREAM_MAX_LEN = 1500  # a few datagrams: enough to fill the small bounds the targets set


class BoundViolation(AssertionError):
    """A bounded table grew past its bound: a bug, never an expected outcome."""


@dataclass(frozen=True, slots=True)
class FuzzTarget:
    name: str
    run: Callable[[bytes], object]
    seeds: Callable[[], list[bytes]] = field(default=lambda: [b""])
    expected: tuple[type[Exception], ...] = (DecodeError,)
    max_len: int | None = None  # stream targets: shorter inputs, more of them per second


PROVIDERS: list[str] = [
    "m2mc.fuzz_targets:wire_targets",
    "m2mc.fuzz_targets:transport_targets",
    "m2mc.fuzz_targets:ordering_targets",
    "m2mc.fuzz_targets:security_targets",
    "m2mc.fuzz_targets:group_targets",
    "m2mc.fuzz_targets:infra_targets",
    "m2mc.infra.fuzzing:targets",
    "m2mc.fuzz_targets:chat_targets",
]


def load_targets(names: list[str] | None = None) -> tuple[list[FuzzTarget], list[str]]:
    """All targets (or those named), and the providers that could not be imported."""
    targets: list[FuzzTarget] = []
    unavailable: list[str] = []
    for spec in PROVIDERS:
        module_name, _, function = spec.partition(":")
        try:
            provider = getattr(importlib.import_module(module_name), function)
            provided: list[FuzzTarget] = provider()
        except ImportError as exc:
            unavailable.append(f"{spec} ({exc})")
            continue
        targets.extend(provided)
    if names:
        known = {t.name for t in targets}
        missing = [n for n in names if n not in known]
        if missing:
            raise ConfigError(f"unknown fuzz target(s): {', '.join(missing)}; "
                              f"known: {', '.join(sorted(known))}")
        targets = [t for t in targets if t.name in names]
    return targets, unavailable


class _Reader:
    """Consumes fuzz input as small integers and byte strings (never raises)."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def more(self) -> bool:
        return self.pos < len(self.data)

    def u8(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def u16(self) -> int:
        return self.u8() << 8 | self.u8()

    def take(self, n: int) -> bytes:
        chunk = self.data[self.pos:self.pos + n]
        self.pos += len(chunk)
        return chunk


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise BoundViolation(what)


# ------------------------------------------------------------------ wire
def wire_targets() -> list[FuzzTarget]:
    from m2mc.wire.m2mp import M2MPConfig, M2MPLayer
    from m2mc.wire.packet import Packet, decode, encode, fragments
    from m2mc.wire.reassembly import Reassembler, ReassemblyLimits

    def packet(data: bytes) -> object:
        p = decode(data)
        if encode(p) != data:
            raise BoundViolation("packet decode/encode is not a round trip")
        return p

    def seeds() -> list[bytes]:
        out = [*fragments(7, b"m" * 1200), encode(Packet(1, 0, True, b""))]
        return [_stream([d]) for d in out] + [_stream(out), _stream(out[::-1])]

    def reassembly(data: bytes) -> None:
        limits = ReassemblyLimits(message_timeout=1.0, max_partial_messages=8,
                                  max_partial_bytes=4096, max_message_bytes=6000,
                                  completed_cache=16)
        reassembler = Reassembler(limits)
        reader = _Reader(data)
        now = 0.0
        while reader.more():
            now += reader.u8() / 64
            try:
                p = decode(reader.take(reader.u16() % 520))
            except DecodeError:
                continue
            message = reassembler.receive(p, now)
            if message is not None:
                _check(len(message) <= limits.max_message_bytes + 500, "message too large")
            reassembler.on_timer(now)
            reassembler.take_abandoned()
            _check(reassembler.partial_messages <= limits.max_partial_messages,
                   "partial messages over bound")
            _check(reassembler.partial_bytes <= limits.max_partial_bytes,
                   "partial bytes over bound")

    def layer(data: bytes) -> None:
        cfg = M2MPConfig(message_timeout=1.0, max_partial_messages=8, max_partial_bytes=4096,
                         max_message_bytes=6000, completed_cache=16, own_id_cache=8)
        m2mp = M2MPLayer(cfg)
        reader = _Reader(data)
        if reader.u8() & 1:
            m2mp.add_filter(b"MC")
        now = 0.0
        while reader.more():
            now += reader.u8() / 64
            m2mp.receive_datagram(reader.take(reader.u16() % 520), now)
            m2mp.on_timer(now)
            m2mp.events()
            _check(m2mp.partial_messages <= cfg.max_partial_messages,
                   "partial messages over bound")
            _check(m2mp.partial_bytes <= cfg.max_partial_bytes, "partial bytes over bound")

    def packet_seeds() -> list[bytes]:
        return list(fragments(7, b"m" * 600))

    return [
        FuzzTarget("m2mp.packet", packet, packet_seeds),
        FuzzTarget("m2mp.reassembly", reassembly, seeds, max_len=STREAM_MAX_LEN),
        FuzzTarget("m2mp.layer", layer, lambda: [b"\x01" + s for s in seeds()],
                   max_len=STREAM_MAX_LEN),
    ]


def _stream(datagrams: list[bytes]) -> bytes:
    """The stateful targets' input format: per datagram, a time step, a length, the bytes."""
    return b"".join(b"\x01" + len(d).to_bytes(2, "big") + d for d in datagrams)


# ------------------------------------------------------------------ transport
def transport_targets() -> list[FuzzTarget]:
    from m2mc.transport.frames import MAX_FRAME, FrameDecoder, encode_frame
    from m2mc.transport.url import parse_channel_url

    def frames(data: bytes) -> None:
        decoder = FrameDecoder()
        reader = _Reader(data)
        while reader.more():
            decoder.feed(reader.take(1 + reader.u8()))
            _check(decoder.buffered <= MAX_FRAME + 1, "frame decoder buffer over one frame")

    def url(data: bytes) -> object:
        return parse_channel_url(data.decode("utf-8", "surrogateescape"))

    def url_seeds() -> list[bytes]:
        return [b"udp-multicast://239.255.77.77:7777?iface=127.0.0.1&ttl=1",
                b"udp://127.0.0.1:9000,127.0.0.1:9001?bind=127.0.0.1:0",
                b"daemon://127.0.0.1:5678", b"mem://x", b"null://"]

    return [
        FuzzTarget("transport.frames", frames,
                   lambda: [encode_frame(b"abc") + encode_frame(b"") + b"\x01"],
                   max_len=STREAM_MAX_LEN),
        FuzzTarget("transport.url", url, url_seeds, expected=(ConfigError,)),
    ]


# ------------------------------------------------------------------ ordering
def ordering_targets() -> list[FuzzTarget]:
    from m2mc.ordering import MessageId

    def message_id(data: bytes) -> object:
        mid = MessageId.parse(data.decode("utf-8", "surrogateescape"))
        if MessageId.parse(str(mid)) != mid:
            raise BoundViolation("MessageId parse/str is not a round trip")
        return mid

    return [FuzzTarget("ordering.message_id", message_id, lambda: [b"alice:12", b"", b"a:b:3"])]


# ------------------------------------------------------------------ security
def security_targets() -> list[FuzzTarget]:
    from m2mc.security.auth import AuthConfig, GroupAuth

    prefix = b"MC\x01" + bytes(8) + b"\x01\x01"
    key = bytes(range(32))

    def open_hmac(data: bytes) -> object:
        return GroupAuth("g", key, "fuzz").open(data, len(prefix))

    def open_aead(data: bytes) -> object:
        return GroupAuth("g", key, "fuzz", config=AuthConfig("chacha20-poly1305")).open(
            data, len(prefix))

    def seeds(suite: str) -> Callable[[], list[bytes]]:
        def make() -> list[bytes]:
            sender = GroupAuth("g", key, "alice", config=AuthConfig(suite))
            return [sender.seal(prefix, b"body"), sender.seal(prefix, b"")]
        return make

    return [FuzzTarget("security.open_hmac", open_hmac, seeds("hmac-sha256")),
            FuzzTarget("security.open_aead", open_aead, seeds("chacha20-poly1305"))]


# ------------------------------------------------------------------ group layer
def group_targets() -> list[FuzzTarget]:
    from m2mc.group import codec

    def frame(data: bytes) -> object:
        f = codec.split_frame(data)
        return codec.decode_body(f.kind, f.body)

    def seeds() -> list[bytes]:
        tag = codec.group_tag("g")
        out = _group_examples(codec, tag)
        for kind in codec.Kind:
            header = codec.HEADER.pack(codec.MAGIC, codec.VERSION, tag, kind, 0)
            for body in (["p"], ["p", 1], ["p", 1, {"q": [1, 2]}], ["p", [["p", 1, "", 0, b"x"]]],
                         ["p", 1, "sb", ""], ["p", "q", 1, [], 0]):
                out.append(header + msgpack.packb(body, use_bin_type=True))
        return out

    return [FuzzTarget("group.frame", frame, seeds)]


def _group_examples(codec: Any, tag: bytes) -> list[bytes]:
    """Real group messages to start from (none if the codec's types have moved on)."""
    from m2mc.ordering import ROOT, Message, MessageId

    try:
        bodies = [
            codec.Adv("p"), codec.Leave("p", 1), codec.Join("p", 1, "sb", "team"),
            codec.Data("p", [Message(MessageId("p", 1), ROOT, b"hi"),
                             Message(MessageId("p", 2), MessageId("q", 1), b"re", {"p": 2}, 3)]),
            codec.SyncReq("p", 1, {"q": [(1, 3), (5, 5)]}),
            codec.Nack("p", {"q": [(1, 2)]}, [(4, 9)]),
        ]
        return [codec.encode(tag, body) for body in bodies]
    except (TypeError, AttributeError):
        return []


# ------------------------------------------------------------------ infrastructure mode
def infra_targets() -> list[FuzzTarget]:
    import struct
    import zlib

    from m2mc.infra import codec

    header = struct.Struct(">3sI")

    def with_checksum(body: bytes) -> bytes:
        return header.pack(codec.MAGIC, zlib.crc32(body)) + body

    def body_seeds() -> list[bytes]:
        fields: list[object] = [1, "a", b"x", True, 1.5, [], [1, "m", 2]]
        return [msgpack.packb([tag, *fields[:n]], use_bin_type=True)
                for tag in range(32) for n in (0, 2, 4, 7)]

    return [
        FuzzTarget("infra.frame", codec.decode,
                   lambda: [with_checksum(b) for b in body_seeds()[:16]]),
        # The checksum stops almost every mutation; this target gets past it to the body.
        FuzzTarget("infra.body", lambda data: codec.decode(with_checksum(data)), body_seeds),
    ]


# ------------------------------------------------------------------ chat
def chat_targets() -> list[FuzzTarget]:
    from m2mc_chat.codec import decode_body, encode_body

    return [FuzzTarget("chat.body", decode_body,
                       lambda: [encode_body("ann", "hello there", 1.5)])]
