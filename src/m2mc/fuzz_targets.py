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

Every function of ``src/`` whose name looks like a decoder (:data:`DECODER_NAME`:
``decode*``, ``unpack*``, ``parse*``, ``feed*``, ``open_frame``, ``split_frame``,
with or without leading underscores) must be listed in :data:`COVERED` (with the
target that reaches it) or in :data:`EXEMPT` (with the reason it sees no outside
input); tests/security/test_fuzz_short.py scans the sources and fails otherwise.
"""

from __future__ import annotations

import ast
import importlib
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgpack

from m2mc.errors import ConfigError, DecodeError

__all__ = ["COVERED", "DECODER_NAME", "EXEMPT", "PROVIDERS", "BoundViolation", "FuzzTarget",
           "find_decoders", "load_targets"]


STREAM_MAX_LEN = 1500  # a few datagrams: enough to fill the small bounds the targets set
# Datagrams a stream target cuts are up to this long: past 508 bytes, so packets of a
# larger packet size (docs/m2mp.md) are fuzzed too, within what STREAM_MAX_LEN holds.
FUZZ_DATAGRAM = 1600


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
    "m2mc.fuzz_group:targets",
    "m2mc.fuzz_targets:infra_targets",
    "m2mc.fuzz_infra:targets",
    "m2mc.fuzz_targets:chat_targets",
]


DECODER_NAME = re.compile(r"^_*(decode|unpack|parse|feed)|^(open|split)_frame$")

# Decoders ("module:qualname") and the target that fuzzes each.
COVERED: dict[str, str] = {
    "m2mc.infra.persist:decode_saved": "infra.saved_state",
    "m2mc.wire.packet:decode": "m2mp.packet",
    "m2mc.transport.frames:FrameDecoder.feed": "transport.frames",
    "m2mc.transport.url_syntax:parse_channel_url": "transport.url",
    "m2mc.transport.url_syntax:_parse": "transport.url",
    "m2mc.transport.linkwatch:parse_messages": "transport.rtnetlink",
    "m2mc.transport.linkwatch:LinkState.feed": "transport.rtnetlink",
    "m2mc.transport.linkwatch:AddressState.feed": "transport.rtnetlink",
    "m2mc.ordering.ids:MessageId.parse": "ordering.message_id",
    "m2mc.group.groupwire:open_frame": "security.groupwire",
    "m2mc.group.codec:split_frame": "group.frame",
    "m2mc.group.codec:decode_body": "group.frame",
    "m2mc.group.stream_codec:decode_descriptor": "group.stream_head",
    "m2mc.infra.codec:decode": "infra.frame",
    "m2mc.infra.codec:decode_body": "infra.body",
    "m2mc.infra.codec:_unpack": "infra.saved_host",
    "m2mc.infra.codec:unpack_epoch": "infra.saved_host",
    "m2mc.infra.codec:unpack_record": "infra.saved_host",
    "m2mc.infra.codec:unpack_snapshot": "infra.saved_host",
    "m2mc.infra.state:unpack_groups": "infra.saved_host",
    "m2mc.infra.wire:InfraWire.decode": "infra.sealed",
    "m2mc.infra.pieces:Reassembly.feed": "infra.pieces",
    "m2mc.infra_runtime.net:FrameReader.feed": "infra.backbone_stream",
    "m2mc.infra_runtime.net:parse_address": "infra.address",
    "m2mc.api.infra_groups:unpack_body": "infra.payload",
    "m2mc_chat.codec:decode_body": "chat.body",
}

# Functions named like decoders that never see input from the network.
EXEMPT: dict[str, str] = {
    "m2mc.sim.infra_stack:MemberSimStack.decode_errors": "a counter (the core's), not a decoder",
    "m2mc.api.node:_parse_mode": "the application's NodeConfig.mode (its own code, not outside "
                                 "input)",
    "m2mc.infra_runtime.member_driver:MemberDriver.decode_errors": "a counter, not a decoder",
    "m2mc.security.keys:parse_key": "the operator's key text (config or a private key file)",
    "m2mc.metrics.address:parse_metrics_address": "the operator's --metrics flag or config "
                                                  "value (tests/metrics: bad ones exit 2)",
    "m2mc.sim.flood_stack:_parse": "the simulator's own datagrams, made in the same process",
    "m2mc.transport.url_syntax:parse_iface": "the user's --iface flag; its checks (_iface) "
                                             "are fuzzed through parse_channel_url's iface=",
    "m2mc.sim.scenario:parse_scenario": "the user's scenario file",
    "m2mc.sim.chaos:parse_chaos": "the user's scenario file (its [[chaos]] tables)",
    "m2mc.sim.decode_memo:DecodeMemo.decode": "the simulator's own datagrams, decoded by "
                                              "codec.decode_body (fuzzed: group.frame) and "
                                              "remembered",
    "m2mc.sim.schema:parse_dist": "the user's scenario file",
    "m2mc_chat.config:parse_infra": "the user's chat configuration",
    "m2mc_chat.script:parse_script": "the user's chat script",
    "m2mc_pipeline.sweep:parse_spec": "the user's command line",
}


def find_decoders(source: str, module: str) -> Iterator[str]:
    """``module:qualname`` of every function in ``source`` named like a decoder
    (module level, or a method of a module-level class, nested classes included)."""

    def walk(node: ast.AST, prefix: str) -> Iterator[str]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                if DECODER_NAME.match(child.name):
                    yield f"{module}:{prefix}{child.name}"
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")

    yield from walk(ast.parse(source), "")


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


class ByteReader:
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


def check_bound(ok: bool, what: str) -> None:
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
        out = [*fragments(7, b"m" * 1200), encode(Packet(1, 0, True, b"")),
               *fragments(8, b"w" * 1300, 1000)]
        return [_stream([d]) for d in out] + [_stream(out), _stream(out[::-1])]

    def reassembly(data: bytes) -> None:
        limits = ReassemblyLimits(message_timeout=1.0, max_partial_messages=8,
                                  max_partial_bytes=4096, max_message_bytes=6000,
                                  completed_cache=16)
        reassembler = Reassembler(limits)
        reader = ByteReader(data)
        now = 0.0
        while reader.more():
            now += reader.u8() / 64
            try:
                p = decode(reader.take(reader.u16() % FUZZ_DATAGRAM))
            except DecodeError:
                continue
            message = reassembler.receive(p, now)
            if message is not None:
                check_bound(len(message) <= limits.max_message_bytes + 500, "message too large")
            reassembler.on_timer(now)
            reassembler.take_abandoned()
            check_bound(reassembler.partial_messages <= limits.max_partial_messages,
                   "partial messages over bound")
            check_bound(reassembler.partial_bytes <= limits.max_partial_bytes,
                   "partial bytes over bound")

    def layer(data: bytes) -> None:
        cfg = M2MPConfig(message_timeout=1.0, max_partial_messages=8, max_partial_bytes=4096,
                         max_message_bytes=6000, completed_cache=16, own_id_cache=8)
        m2mp = M2MPLayer(cfg, random.Random(0))  # the IDs it draws play no part here
        reader = ByteReader(data)
        if reader.u8() & 1:
            m2mp.add_filter(b"MC")
        now = 0.0
        while reader.more():
            now += reader.u8() / 64
            m2mp.receive_datagram(reader.take(reader.u16() % FUZZ_DATAGRAM), now)
            m2mp.on_timer(now)
            m2mp.events()
            check_bound(m2mp.partial_messages <= cfg.max_partial_messages,
                   "partial messages over bound")
            check_bound(m2mp.partial_bytes <= cfg.max_partial_bytes, "partial bytes over bound")

    def packet_seeds() -> list[bytes]:
        return [*fragments(7, b"m" * 600), *fragments(9, b"l" * 1500, 1472)]

    return [
        FuzzTarget("m2mp.packet", packet, packet_seeds),
        FuzzTarget("m2mp.reassembly", reassembly, seeds, max_len=STREAM_MAX_LEN),
        FuzzTarget("m2mp.layer", layer, lambda: [b"\x01" + s for s in seeds()],
                   max_len=STREAM_MAX_LEN),
        _segments_target(),
    ]


def _segments_target() -> FuzzTarget:
    """GRO blocks (Segments) of hostile bytes into the M2MP layer, whose run check
    (m2mc.native.consecutive, in C where it is built: the one C that reads network
    bytes) must answer as its Python twin does for the block's own header and others."""
    from m2mc.native import consecutive, consecutive_py, fragment_list
    from m2mc.wire.m2mp import M2MPConfig, M2MPLayer
    from m2mc.wire.segments import SEGMENT, Segments

    def run(data: bytes) -> None:
        cfg = M2MPConfig(message_timeout=1.0, max_partial_messages=8, max_partial_bytes=8192,
                         max_message_bytes=6000, completed_cache=16, own_id_cache=8)
        m2mp = M2MPLayer(cfg, random.Random(0))
        reader = ByteReader(data)
        now = 0.0
        while reader.more():
            now += reader.u8() / 64
            block = Segments(reader.take(reader.u16() % (6 * SEGMENT + 1)))
            head = int.from_bytes(block[:8].ljust(8, b"\0"), "big")
            count = max(1, -(-len(block) // SEGMENT))
            for args in ((count, head >> 32, head & 0xFFFF_FFFF),
                         (1 + reader.u8() % 8, head >> 32 ^ reader.u8(), reader.u16() << 16)):
                check_bound(consecutive(block, *args) == consecutive_py(block, *args),
                            "the compiled and the Python run checks differ")
            # (a channel joins only reads of more than one packet: m2mc.transport.offload)
            m2mp.receive_datagrams([block if len(block) > SEGMENT else bytes(block)], now)
            m2mp.on_timer(now)
            m2mp.events()
            check_bound(m2mp.partial_bytes <= cfg.max_partial_bytes, "partial bytes over bound")

    def seeds() -> list[bytes]:
        whole = b"".join(fragment_list(7, b"s" * 2600))  # six packets: 5 full, then the last
        return [_stream([whole]), _stream([whole[:3 * SEGMENT], whole[3 * SEGMENT:]])]

    return FuzzTarget("m2mp.segments", run, seeds)


def _stream(datagrams: list[bytes]) -> bytes:
    """The stateful targets' input format: per datagram, a time step, a length, the bytes."""
    return b"".join(b"\x01" + len(d).to_bytes(2, "big") + d for d in datagrams)


# ------------------------------------------------------------------ transport
def transport_targets() -> list[FuzzTarget]:
    from m2mc.transport.frames import MAX_FRAME, FrameDecoder, encode_frame
    from m2mc.transport.url import parse_channel_url

    def frames(data: bytes) -> None:
        decoder = FrameDecoder()
        reader = ByteReader(data)
        while reader.more():
            decoder.feed(reader.take(1 + reader.u8()))
            check_bound(decoder.buffered <= MAX_FRAME + 1, "frame decoder buffer over one frame")

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
        _rtnetlink_target(),
    ]


def _rtnetlink_target() -> FuzzTarget:
    """The interface watcher's decoder (kernel messages, but cheap to make sure of)."""
    from m2mc.transport import linkwatch as lw

    def run(data: bytes) -> None:
        state = lw.LinkState(3, "eth0", "10.77.0.4")
        follower = lw.AddressState(3, "eth0", "10.77.0.4")
        for message in lw.parse_messages(data):
            state.feed(message)
            follower.feed(message)
            if follower.current is not None and follower.current not in follower.addresses:
                raise BoundViolation("the followed address is not one the interface holds")

    def seeds() -> list[bytes]:
        name = lw._RTATTR.pack(9, lw.IFLA_IFNAME) + b"eth0\0" + bytes(3)
        link = lw._IFINFOMSG.pack(0, 1, 3, lw.IFF_UP | lw.IFF_RUNNING, 0) + name
        addr = lw._IFADDRMSG.pack(2, 24, 0, 0, 3) + lw._RTATTR.pack(8, lw.IFA_LOCAL) + bytes(4)
        return [b"".join(lw._NLMSGHDR.pack(16 + len(body), kind, 0, 0, 0) + body
                         for kind, body in ((lw.RTM_NEWLINK, link), (lw.RTM_NEWADDR, addr)))]

    return FuzzTarget("transport.rtnetlink", run, seeds)


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
            FuzzTarget("security.open_aead", open_aead, seeds("chacha20-poly1305")),
            _groupwire_target()]


def _groupwire_target() -> FuzzTarget:
    """``security.groupwire``: a received keyed group frame end to end, as the group
    manager takes it: :func:`open_frame`, then the group codec's body decoder, and
    the body's sender must be the sealing one. The first input byte chooses: odd,
    the rest is taken as a plain group frame that the target seals with the
    group's key first (so mutations reach the body behind the tag); even, the rest
    is the received message as is. The receiver's replay table stays within its bound.
    """
    from m2mc.group import codec, groupwire
    from m2mc.security.auth import AuthConfig, GroupAuth

    key = bytes(range(32))
    config = AuthConfig(replay_window=64, max_senders=4)
    receiver = GroupAuth("g", key, "me", config=config)
    senders: dict[str, GroupAuth] = {}

    def sealer(sender: str) -> GroupAuth:
        auth = senders.get(sender)
        if auth is None:
            if len(senders) > 64:
                senders.clear()
            auth = senders[sender] = GroupAuth("g", key, sender, config=config)
        return auth

    def run(data: bytes) -> object:
        message = data[1:]
        if data[:1] and data[0] & 1 and len(message) >= codec.HEADER_SIZE and not (
                message[codec.HEADER_SIZE - 1] & codec.FLAG_AUTH):
            sender = claimed_sender(codec, message) or "x"
            message = groupwire.seal_frame(sealer(sender), message)
        try:
            frame, sealed_by = groupwire.open_frame(receiver, message)
            body = codec.decode_body(frame.kind, frame.body)
        finally:
            check_bound(len(receiver.replay) <= config.max_senders, "replay table over bound")
        if sealed_by is not None and body.sender != sealed_by:
            return "sender_mismatch"  # what GroupNode counts and drops
        return body

    def seeds() -> list[bytes]:
        tag = codec.group_tag("g")
        plain = group_examples(codec, tag)
        alice = GroupAuth("g", key, "p", config=config)
        return ([b"\x01" + f for f in plain] + [b"\x00" + groupwire.seal_frame(alice, f)
                                                 for f in plain] + [b"\x00" + f for f in plain])

    return FuzzTarget("security.groupwire", run, seeds)


def claimed_sender(codec: Any, frame: bytes) -> str | None:
    """The sender a plain group frame's body names, if it decodes at all."""
    try:
        f = codec.split_frame(frame)
        sender = codec.decode_body(f.kind, f.body).sender
    except DecodeError:
        return None
    return sender if isinstance(sender, str) and 0 < len(sender.encode()) <= 64 else None


# ------------------------------------------------------------------ group layer
def group_examples(codec: Any, tag: bytes) -> list[bytes]:
    """Real group messages to start from (none if the codec's types have moved on)."""
    from m2mc.kinds import Order
    from m2mc.ordering import ROOT, Message, MessageId

    try:
        bodies = [
            codec.Adv("p"), codec.Leave("p", 1), codec.Join("p", 1, Order.SB, "team"),
            codec.Join("p", 2, Order.SB, "team", "Pia"),
            codec.Status("p", 2, {"q": 1}, (codec.MemberEntry("p", 2, True),), None, 0, "Pia"),
            codec.GrpsInfo("p", (codec.GrpInfo("g", "team", Order.SB, (
                codec.MemberEntry("p", 2, True),), False, (("p", "Pia"),)),)),
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
        *_infra_runtime_targets(),
        _saved_member_target(),
    ]


def _saved_member_target() -> FuzzTarget:
    """A member's saved state as read back from a damaged file (``infra.saved_state``):
    the numbering, the membership JSON and pending rows, each from the input. Unusable
    numbering is a SavedStateError; anything else is a fresh join, never a numbering
    below an id a pending row used."""
    from m2mc.errors import SavedStateError
    from m2mc.infra.persist import StoredMember, decode_saved, encode_membership

    def run(data: bytes) -> object:
        parts = [*data.split(b"\x00", 2), b"", b""]
        text = parts[0].decode("latin-1")
        app_seq: object = int(text) if text.isascii() and text.isdigit() else text
        rows: list[tuple[object, object, object]] = []
        for chunk in parts[2].split(b"\x01")[:64] if parts[2] else []:
            r = ByteReader(chunk)
            rows.append((r.u16() - 2, r.u16() - 2, r.take(len(chunk))))
        saved = decode_saved(StoredMember("m1", app_seq, parts[1].decode("utf-8", "replace"),
                                          tuple(rows)))
        used = [a for a, _, _ in rows if isinstance(a, int) and a >= 1]
        check_bound(not used or saved.app_seq >= max(used) or bool(saved.problem)
               or saved.app_seq >= max(i.app_seq for i in saved.pending),
               "saved numbering below a pending message's id")
        return saved

    membership = encode_membership(group="infra", phase="member", join_id=7, mystable=12,
                                   mynew=3, confirmed=2, leave_requested=False).encode()
    return FuzzTarget("infra.saved_state", run,
                      lambda: [b"5\x00" + membership + b"\x00\x00\x03\x00\x02hello",
                               b"0\x00" + membership, b"x\x00{}", b"3\x00\x00"],
                      expected=(SavedStateError,))


def _infra_runtime_targets() -> list[FuzzTarget]:
    """The infrastructure runtime's decoders: the application body a member delivers
    (``infra.payload``), the backbone's stream framing (``infra.backbone_stream``:
    chunks of a TCP stream; the buffer never holds a frame past its bound, and a
    closed stream yields nothing more), and addresses named by beacons and statuses
    (``infra.address``)."""
    from m2mc.api.infra_groups import pack_body, unpack_body
    from m2mc.infra_runtime.net import MAX_PEER_NAME, FrameReader, parse_address
    from m2mc.ordering import MessageId

    def payload(data: bytes) -> object:
        body, parent = unpack_body(data)
        if unpack_body(pack_body(body, parent)) != (body, parent):
            raise BoundViolation("pack_body/unpack_body is not a round trip")
        return body

    max_frame = 600

    def stream(data: bytes) -> None:
        reader = FrameReader(max_frame)
        r = ByteReader(data)
        while r.more():
            frames = reader.feed(r.take(1 + r.u8()))
            check_bound(reader.buffered <= max_frame + 3, "backbone stream buffer over one frame")
            check_bound(all(len(f) <= max_frame for f in frames), "backbone frame over its bound")
            if reader.closed:
                check_bound(reader.buffered == 0 and reader.feed(b"\x00" * 8) == [],
                       "a closed backbone stream still reads")
            elif reader.peer is not None:
                check_bound(0 < len(reader.peer.encode()) <= MAX_PEER_NAME, "host name over bound")

    def frame(data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + data

    def stream_seeds() -> list[bytes]:
        whole = frame(b"H2") + frame(b"x" * 40) + frame(b"") + frame(b"y" * 300)
        return [bytes((len(whole) - 1,)) + whole if len(whole) <= 256 else whole,
                b"".join(b"\x00" + whole[i:i + 1] for i in range(len(whole))),
                b"\x07" + frame(b"H3") + (9999).to_bytes(4, "big")]

    def address(data: bytes) -> object:
        return parse_address(data[1:].decode("utf-8", "surrogateescape"), "fuzz",
                             ipv6=bool(data[:1] and data[0] & 1))

    return [
        FuzzTarget("infra.payload", payload,
                   lambda: [pack_body(b"hi", MessageId("a", 3)), pack_body(b"x", MessageId(
                       "", 0)), b"\x01\x00\x01x"]),
        FuzzTarget("infra.backbone_stream", stream, stream_seeds, max_len=STREAM_MAX_LEN),
        FuzzTarget("infra.address", address,
                   lambda: [b"\x00127.0.0.1:7000", b"\x0110.77.0.4:9", b"\x01[::1]:80"],
                   expected=(ConfigError,)),
    ]


# ------------------------------------------------------------------ chat
def chat_targets() -> list[FuzzTarget]:
    from m2mc_chat.codec import decode_body, encode_body

    return [FuzzTarget("chat.body", decode_body,
                       lambda: [encode_body("ann", "hello there", 1.5)])]
