"""What the M2MP layer is configured with and what it puts out: :class:`M2MPConfig`,
the events (:class:`MessageReceived`, :class:`MessageAbandoned`, and the streams'
:class:`~m2mc.wire.streams.StreamChunk`) and the counters (:class:`M2MPStats`).
Re-exported by :mod:`m2mc.wire.m2mp`, where the layer itself is."""

from __future__ import annotations

from dataclasses import dataclass, field

from m2mc.wire.packet import MAX_FRAGMENT, MAX_PACKET, check_packet_size
from m2mc.wire.streams import StreamChunk


@dataclass(slots=True)
class M2MPConfig:
    """M2MP settings; the seed's property names are given where one exists."""

    message_timeout: float = 5.0  # edu.rit.m2mp.messagetimeout (ms there, seconds here)
    flow_timeout: float = 0.1  # edu.rit.m2mp.flowtimeout
    redundancy: int = 2  # edu.rit.m2mp.redundancy
    flow_control: bool = True
    # Packets whose looped-back copy may be awaited at once. 1 is the seed's stop-and-wait;
    # None leaves it to the driver: this layer alone uses 1, M2MPEndpoint a small window.
    flow_window: int | None = None
    max_partial_messages: int = 1024
    max_partial_bytes: int = 16 * 1024 * 1024
    max_message_bytes: int = 64 * 1024 * 1024
    completed_cache: int = 65536
    own_id_cache: int = 65536
    # Streams (seeds/002 section 4, m2mc.wire.streams): 0 delivers every message whole.
    # Otherwise a message whose first stream_threshold bytes are here and is not complete
    # is read as a stream (StreamChunk events), holding at most stream_window early
    # fragments, at most max_streams at once.
    stream_threshold: int = 0
    stream_window: int = 512
    max_streams: int = 32
    # Bytes per packet this layer sends (header included): 508 by default, safe on any
    # IPv4 path; up to MAX_DATAGRAM (65,507) where the user names more (``?packet=N``
    # on the channel URL, docs/m2mp.md). Receiving takes any size up to MAX_DATAGRAM.
    packet_size: int = MAX_PACKET

    def validate(self) -> None:
        from m2mc.errors import ConfigError

        if self.message_timeout <= 0:
            raise ConfigError(f"message_timeout must be > 0, got {self.message_timeout}")
        if self.flow_timeout <= 0:
            raise ConfigError(f"flow_timeout must be > 0, got {self.flow_timeout}")
        if self.redundancy < 1:
            raise ConfigError(f"redundancy must be >= 1, got {self.redundancy}")
        if self.flow_window is not None and self.flow_window < 1:
            raise ConfigError(f"flow_window must be >= 1, got {self.flow_window}")
        for name in ("max_partial_messages", "max_partial_bytes", "max_message_bytes",
                     "completed_cache", "own_id_cache", "stream_window", "max_streams"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        check_packet_size(self.packet_size)
        if self.stream_threshold and not (
                MAX_FRAGMENT <= self.stream_threshold <= self.max_message_bytes):
            raise ConfigError(f"stream_threshold must be 0 or {MAX_FRAGMENT} to "
                              f"max_message_bytes, got {self.stream_threshold}")


def packet_size_for(configured: int, channel: int) -> int:
    """The packet size a layer sends at on a channel: the one its URL names
    (``packet=``) or else the configuration's; ConfigError if both name one and they
    differ (docs/m2mp.md, "Packet size")."""
    from m2mc.errors import ConfigError

    if channel == MAX_PACKET:
        return configured
    if configured not in (MAX_PACKET, channel):
        raise ConfigError(f"packet size {configured} in the configuration but {channel} "
                          f"in the channel URL: name it in one place")
    return channel


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


M2MPEvent = MessageReceived | MessageAbandoned | StreamChunk


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
    loopbacks_missed: int = 0  # released early: the copy of a later packet came back first
    filtered_fragments: int = 0  # further packets (copies, fragments) of a filtered message
    streams_in: int = 0  # messages read as streams (each also in messages_in once complete)

    def as_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}
