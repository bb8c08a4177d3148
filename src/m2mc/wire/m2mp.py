"""The sans-IO M2MP layer: message transfer and flow control sublayers (seeds/002 section 5).

Inputs: :meth:`M2MPLayer.send`, :meth:`M2MPLayer.receive_datagram`,
:meth:`M2MPLayer.on_timer`. Outputs: :meth:`M2MPLayer.datagrams_to_send` (what the
driver must put on the channel now) and :meth:`M2MPLayer.events` (messages for
the application, abandoned messages). :meth:`M2MPLayer.next_deadline` tells the
driver when to call ``on_timer``. No sockets, clocks or threads.

Flow control (seeds/002 "Flow Control Sublayer"): after the N copies of one
packet go out, the next packet waits until the looped-back copy has come in or
``flow_timeout`` has passed. Channels that do not loop packets back (unicast
``udp://``) run with ``flow_control=False``.

Our own packets are recognised by message ID (kept for a while after sending)
and never delivered to ourselves (seeds/002 2.3).
"""

from __future__ import annotations

import random
import struct
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from m2mc.wire.packet import (
    HEADER_SIZE,
    LAST_FLAG,
    MAX_FRAGMENT,
    MAX_FRAGMENT_NUMBER,
    MAX_PACKET,
    fragments,
)
from m2mc.wire.reassembly import Abandoned, Reassembler, ReassemblyLimits


@dataclass(slots=True)
class M2MPConfig:
    """M2MP settings; the seed's property names are given where one exists."""

    message_timeout: float = 5.0  # edu.rit.m2mp.messagetimeout (ms there, seconds here)
    flow_timeout: float = 0.1  # edu.rit.m2mp.flowtimeout
    redundancy: int = 2  # edu.rit.m2mp.redundancy
    flow_control: bool = True
    max_partial_messages: int = 1024
    max_partial_bytes: int = 16 * 1024 * 1024
    max_message_bytes: int = 64 * 1024 * 1024
    completed_cache: int = 65536
    own_id_cache: int = 65536

    def validate(self) -> None:
        from m2mc.errors import ConfigError

        if self.message_timeout <= 0:
            raise ConfigError(f"message_timeout must be > 0, got {self.message_timeout}")
        if self.flow_timeout <= 0:
            raise ConfigError(f"flow_timeout must be > 0, got {self.flow_timeout}")
        if self.redundancy < 1:
            raise ConfigError(f"redundancy must be >= 1, got {self.redundancy}")
        for name in ("max_partial_messages", "max_partial_bytes", "max_message_bytes",
                     "completed_cache", "own_id_cache"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True, slots=True)
class MessageReceived:
    message_id: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class MessageAbandoned:
    """A message that matched (or may have matched) a filter was given up (seeds/002 2.3)."""

    message_id: int
    reason: str
    bytes: int


M2MPEvent = MessageReceived | MessageAbandoned


@dataclass(slots=True)
class M2MPStats:
    packets_in: int = 0
    packets_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    malformed: int = 0
    duplicates: int = 0
    looped_back: int = 0
    messages_in: int = 0
    messages_out: int = 0
    filtered_out: int = 0
    abandoned: dict[str, int] = field(default_factory=dict)
    flow_timeouts: int = 0

    def as_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


_HEADER = struct.Struct(">II")  # message ID, last flag + fragment number (CONTRACTS 1)


class M2MPLayer:
    """One instance of the M2MP layer (one per process, or one in the daemon)."""

    def __init__(self, config: M2MPConfig | None = None, rng: random.Random | None = None) -> None:
        self.config = config or M2MPConfig()
        self.config.validate()
        # No generator given: seed one from OS entropy. A fixed seed would make two
        # processes draw the same message IDs and drop each other's messages as their own.
        self._rng = rng if rng is not None else random.Random()
        cfg = self.config
        self._reassembler = Reassembler(ReassemblyLimits(
            message_timeout=cfg.message_timeout,
            max_partial_messages=cfg.max_partial_messages,
            max_partial_bytes=cfg.max_partial_bytes,
            max_message_bytes=cfg.max_message_bytes,
            completed_cache=cfg.completed_cache,
        ))
        self._filters: list[bytes] = []
        self._longest_filter = 0
        self._accept_all = False
        self._own: OrderedDict[int, None] = OrderedDict()
        self._queue: deque[bytes] = deque()  # encoded packets waiting for flow control
        self._awaiting: bytes | None = None  # header of the packet whose loopback we wait for
        self._flow_deadline: float | None = None
        self._events: list[M2MPEvent] = []
        self.stats = M2MPStats()

    # ----------------------------------------------------------------- filters
    def add_filter(self, prefix: bytes) -> None:
        """Register a message filter (seeds/002 2.3); an empty prefix matches everything."""
        if prefix not in self._filters:
            self._filters.append(bytes(prefix))
            self._refresh_filters()

    def remove_filter(self, prefix: bytes) -> None:
        if prefix in self._filters:
            self._filters.remove(prefix)
            self._refresh_filters()

    @property
    def filters(self) -> tuple[bytes, ...]:
        return tuple(self._filters)

    def matches(self, message: bytes) -> bool:
        if self._accept_all:
            return True
        return any(message.startswith(prefix) for prefix in self._filters)

    def _refresh_filters(self) -> None:
        self._accept_all = b"" in self._filters
        self._longest_filter = max((len(p) for p in self._filters), default=0)

    # ----------------------------------------------------------------- sending
    def send(self, payload: bytes, now: float) -> int:
        """Queue one message; return its random message ID. Drain with datagrams_to_send."""
        message_id = self._new_message_id()
        if len(payload) <= MAX_FRAGMENT:  # one packet: skip the generator (small messages)
            self._queue.append(_HEADER.pack(message_id, LAST_FLAG) + payload)
        else:
            self._queue.extend(fragments(message_id, payload))
        self.stats.messages_out += 1
        return message_id

    def datagrams_to_send(self, now: float) -> list[bytes]:
        """Datagrams the driver must transmit now, copies included, in order."""
        queue = self._queue
        if not queue:
            return []
        config = self.config
        redundancy = config.redundancy
        if config.flow_control:
            # One packet (N copies) at a time, then wait for its looped-back copy.
            if self._awaiting is not None:
                return []
            packet = queue.popleft()
            out = [packet] * redundancy
            self._awaiting = packet[:8]
            self._flow_deadline = now + config.flow_timeout
            size = len(packet) * redundancy
        else:
            out = list(queue) if redundancy == 1 else [
                p for p in queue for _ in range(redundancy)]
            queue.clear()
            size = sum(map(len, out))
        self.stats.packets_out += len(out)
        self.stats.bytes_out += size
        return out

    @property
    def flow_blocked(self) -> bool:
        """True while a sent packet's looped-back copy is awaited (flow control)."""
        return self._awaiting is not None

    @property
    def queued_packets(self) -> int:
        """Packets held back by flow control (the driver may apply back-pressure on this)."""
        return len(self._queue)

    def _new_message_id(self) -> int:
        own = self._own
        while True:
            message_id = self._rng.getrandbits(32)
            if message_id not in own:
                break
        own[message_id] = None
        while len(own) > self.config.own_id_cache:
            own.popitem(last=False)
        return message_id

    # ---------------------------------------------------------------- receiving
    def receive_datagram(self, datagram: bytes, now: float) -> None:
        stats = self.stats
        stats.packets_in += 1
        size = len(datagram)
        stats.bytes_in += size
        if not HEADER_SIZE <= size <= MAX_PACKET:
            stats.malformed += 1  # the only way a datagram can fail to be a packet
            return
        # The header is read in place (no Packet object): this is the per-packet hot path.
        message_id, word = _HEADER.unpack_from(datagram)
        if message_id in self._own:
            # Our own looped-back packet: releases flow control (seeds/002 section 5).
            stats.looped_back += 1
            if self._awaiting is not None and datagram[:8] == self._awaiting:
                self._awaiting = None
                self._flow_deadline = None
            return
        fragment = word & MAX_FRAGMENT_NUMBER
        data = datagram[HEADER_SIZE:]
        reassembler = self._reassembler
        before = reassembler.duplicates
        message = reassembler.receive_fragment(message_id, fragment, word >= LAST_FLAG, data,
                                               now)
        if reassembler.duplicates != before:
            stats.duplicates += 1
            return
        if message is None:
            # Early filtering: once fragment 0 is in, we know whether anyone wants it.
            if fragment == 0 and len(data) >= self._longest_filter and not self.matches(data):
                stats.filtered_out += 1
                reassembler.mark_done(message_id, now)
            if reassembler.abandoned:
                self._collect_abandoned()
            return
        if self.matches(message):
            stats.messages_in += 1
            self._events.append(MessageReceived(message_id, message))
        else:
            stats.filtered_out += 1

    # ------------------------------------------------------------------ timers
    def on_timer(self, now: float) -> None:
        self._reassembler.on_timer(now)
        self._collect_abandoned()
        if self._flow_deadline is not None and now >= self._flow_deadline:
            self.stats.flow_timeouts += 1
            self._awaiting = None
            self._flow_deadline = None

    def next_deadline(self) -> float | None:
        reassembly, flow = self._reassembler.next_deadline(), self._flow_deadline
        if reassembly is None:
            return flow
        return reassembly if flow is None else min(reassembly, flow)

    # ------------------------------------------------------------------ events
    def events(self) -> list[M2MPEvent]:
        events, self._events = self._events, []
        return events

    @property
    def partial_messages(self) -> int:
        return self._reassembler.partial_messages

    @property
    def partial_bytes(self) -> int:
        return self._reassembler.partial_bytes

    def _collect_abandoned(self) -> None:
        for item in self._reassembler.take_abandoned():
            self._note_abandoned(item)

    def _note_abandoned(self, item: Abandoned) -> None:
        counts = self.stats.abandoned
        counts[item.reason] = counts.get(item.reason, 0) + 1
        # Tell the reader only about a message it could have been reading: fragment 0
        # arrived (seeds/002 section 5 compares the first fragment to the filters) and
        # does not prove that no filter wanted it. Stray fragments are only counted.
        if not item.head:
            return
        if len(item.head) >= self._longest_filter and not self.matches(item.head):
            return
        self._events.append(MessageAbandoned(item.message_id, item.reason, item.bytes))
