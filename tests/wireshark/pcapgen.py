"""Write classic pcap files of synthetic Ethernet/IPv4 UDP datagrams and TCP streams.

For the dissector tests that need no network: every datagram a test hands in is
written as one frame, with the addresses and ports it names; a TCP stream starts with
a three-way handshake and numbers its segments, so Wireshark reassembles it as it
would a captured one.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path
from types import TracebackType

_LINKTYPE_ETHERNET = 1
_ETH = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02\x08\x00"
_SYN, _ACK, _PSH = 0x02, 0x10, 0x08


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _ipv4(src: str, dst: str, proto: int, payload: bytes) -> bytes:
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0, 0x4000, 64, proto, 0,
                         socket.inet_aton(src), socket.inet_aton(dst))
    header = header[:10] + struct.pack("!H", _checksum(header)) + header[12:]
    return header + payload


class PcapWriter:
    """``with PcapWriter(path) as pcap: pcap.udp(...)``; one microsecond between frames."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("wb")
        self._file.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144,
                                     _LINKTYPE_ETHERNET))
        self._t = 1_700_000_000_000_000
        self.frames = 0

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()

    def _frame(self, ip_packet: bytes) -> int:
        self._t += 1
        frame = _ETH + ip_packet
        self._file.write(struct.pack("<IIII", self._t // 1_000_000, self._t % 1_000_000,
                                     len(frame), len(frame)) + frame)
        self.frames += 1
        return self.frames

    def udp(self, src: tuple[str, int], dst: tuple[str, int], payload: bytes) -> int:
        """One datagram; returns its frame number (from 1)."""
        udp = struct.pack("!HHHH", src[1], dst[1], 8 + len(payload), 0) + payload
        return self._frame(_ipv4(src[0], dst[0], 17, udp))

    def tcp_stream(self, src: tuple[str, int], dst: tuple[str, int]) -> TcpStream:
        return TcpStream(self, src, dst)


class TcpStream:
    """One direction of data on a connection (the handshake written at once)."""

    def __init__(self, pcap: PcapWriter, src: tuple[str, int], dst: tuple[str, int]) -> None:
        self.pcap, self.src, self.dst = pcap, src, dst
        self.seq, self.ack = 1000, 5000
        self._segment(self.src, self.dst, self.seq, 0, _SYN, b"")
        self._segment(self.dst, self.src, self.ack, self.seq + 1, _SYN | _ACK, b"")
        self.seq += 1
        self.ack += 1
        self._segment(self.src, self.dst, self.seq, self.ack, _ACK, b"")

    def _segment(self, src: tuple[str, int], dst: tuple[str, int], seq: int, ack: int,
                 flags: int, data: bytes) -> int:
        header = struct.pack("!HHIIBBHHH", src[1], dst[1], seq, ack, 5 << 4, flags, 65535, 0, 0)
        pseudo = struct.pack("!4s4sBBH", socket.inet_aton(src[0]), socket.inet_aton(dst[0]), 0,
                             6, len(header) + len(data))
        checksum = _checksum(pseudo + header + data)
        header = header[:16] + struct.pack("!H", checksum) + header[18:]
        return self.pcap._frame(_ipv4(src[0], dst[0], 6, header + data))

    def send(self, data: bytes, segment: int = 1400) -> list[int]:
        """``data`` in segments of at most ``segment`` bytes, each acknowledged."""
        frames = []
        for at in range(0, len(data), segment):
            chunk = data[at:at + segment]
            frames.append(self._segment(self.src, self.dst, self.seq, self.ack, _ACK | _PSH,
                                        chunk))
            self.seq += len(chunk)
            self._segment(self.dst, self.src, self.ack, self.seq, _ACK, b"")
        return frames
