"""Fuzz targets of infrastructure mode beyond the codec (bench/fuzz.py, docs/security.md).

* ``infra.sealed``: :meth:`InfraWire.decode` of a keyed deployment: only typed
  decode errors may come out, and the replay table stays within its bound.
* ``infra.saved_host``: what a durable host reads back from its store (the stored
  forms of epochs, snapshots and records, m2mc.infra_runtime.host_store), then the log they
  make taken up (:meth:`ReplicaLog.restore`): a damaged file gives a typed error,
  :class:`DecodeError` or :class:`SavedStateError`, never anything else.
* ``infra.host``: a stream of frames (each a msgpack body the target wraps with a
  valid checksum, so mutations reach the protocol, on the cell or the backbone) fed
  to a :class:`HostCore` with small bounds, with time advancing: nothing may raise,
  and no table an outsider fills may pass its bound.
* ``infra.pieces``: datagrams from four sources fed to one socket's reassembly of
  cell frames (:class:`~m2mc.infra.pieces.Reassembly`) with small bounds: nothing but
  counted refusals, the bounds hold, no frame larger than a datagram comes out.

Registered in :data:`m2mc.fuzz_targets.PROVIDERS` as ``m2mc.fuzz_infra:targets``.
"""

from __future__ import annotations

import random
import struct
import zlib
from typing import Any

from m2mc.errors import DecodeError, SavedStateError
from m2mc.fuzz_targets import FuzzTarget
from m2mc.infra import codec
from m2mc.infra import messages as m
from m2mc.infra.codec import MAGIC, encode, encode_body
from m2mc.infra.config import InfraConfig
from m2mc.infra.host import HostCore, HostIdentity
from m2mc.infra.host_persist import StoredHost
from m2mc.infra.ids import NO_EPOCH, Epoch, MemberId
from m2mc.infra.pieces import Reassembly, cut
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.state import pack_groups
from m2mc.infra.wire import INFRA_KEY_CONTEXT, InfraWire
from m2mc.security.auth import AuthConfig, GroupAuth

__all__ = ["targets"]

_KEY = bytes(range(32))
_HEADER = struct.Struct(">3sI")
_STREAM_MAX_LEN = 1500
_A = MemberId("A", 1)
_E = Epoch(1, 0.5, "H1")


def _seed_messages() -> list[Any]:
    rec = m.Record(1, 1, m.APP, _A, 1, 1, 0, b"x")
    return [
        m.Hello("A", "H1", _A, 0, False), m.JoinReq("A", "H1", 1, _A),
        m.NewReq("A", "H1", 2, _A, (m.NewItem(1, 1, b"hi"),)), m.NackReq("A", "H1", 3, _A, 0, 9),
        m.LeaveReq("A", "H1", 4, _A),
        m.Status("H2", 1, "127.0.0.1", 7000, "cell", "H2", 0, (_A,), "", NO_EPOCH, NO_EPOCH, 0, 0,
                 None),
        m.Forward("H2", 1, m.JoinReq("B", "H2", 1, MemberId("B", 2))),
        m.Replicate(_E, 1, (rec,)), m.Sync(_E, 1, 0, None, (rec,)), m.Commit(_E, 1, 1),
        m.Takeover(Epoch(2, 1.0, "H2"), "H2", 0), m.Vote(_E, "H2", "H2"), m.ElectStart(_E),
        m.Fetch("H2", 1, 5), m.StabInfo("H2", ((_A, 1),)), m.Accepted(_E, "H2", 1),
    ]


def _sealed(data: bytes) -> object:
    wire = _sealed.wire  # type: ignore[attr-defined]
    result = wire.decode(data)
    auth = wire.auth
    if len(auth.replay) > auth.config.max_senders:
        raise AssertionError("replay table over its bound")
    return result


def _sealed_seeds() -> list[bytes]:
    out = []
    for sender in ("A", "H2"):
        wire = InfraWire(GroupAuth(INFRA_KEY_CONTEXT, _KEY, sender, counter_start=5))
        for msg in _seed_messages()[:8]:
            out.append(wire.encode(msg))
            out.append(wire.encode(msg, "H1"))
    return out


def _host(data: bytes) -> None:
    cfg = InfraConfig(max_local=4, max_hosts=3, max_forward_queue=4, max_queued_requests=4,
                      control_max_senders=4, early_new_limit=3, max_early_total=5,
                      max_members=4, mcache_size=4, fetch_limit=4).check()
    core = HostCore(HostIdentity("H1", uplink="H1"), cfg, random.Random(1), expected_hosts=1)
    now = 0.0
    core.start(now)
    pos = 0
    while pos + 3 <= len(data):
        flags, size = data[pos], int.from_bytes(data[pos + 1:pos + 3], "big") % 400
        body = data[pos + 3:pos + 3 + size]
        pos += 3 + size
        now += (flags >> 2) / 16
        frame = _HEADER.pack(MAGIC, zlib.crc32(body)) + body
        if flags & 1:
            core.receive_backbone("H2" if flags & 2 else "H3", frame, now)
        else:
            core.receive_cell(f"addr{flags & 2}", frame, now)
        core.on_timer(now)
        core.drain(now)
        g = core.gateway
        _bound(len(g.local) <= cfg.max_local, "gateway local")
        _bound(len(core.directory.known) <= cfg.max_hosts, "directory")
        _bound(len(g.outbox) <= cfg.max_forward_queue, "forward queue")
        _bound(len(g.limiter) <= cfg.control_max_senders, "rate limiter")
        _bound(core.queued_requests <= cfg.max_queued_requests, "queued requests")
        c = core.coordinator
        if c is not None:
            _bound(c.early_total <= cfg.max_early_total, "early NEWs")
            _bound(len(c.work.members) <= cfg.max_members, "members")


_SPLIT = b"\xff\xfe"


def _saved_host(data: bytes) -> None:
    """``promised | log_epoch | snapshot or empty | record | record ...`` (split at
    ``ff fe``), each as a store keeps it; then the log they make is taken up (its
    records applied: a JOINED record's groups decoded, state.unpack_groups)."""
    parts = data.split(_SPLIT)
    while len(parts) < 3:
        parts.append(b"")
    promised = codec.unpack_epoch(parts[0]) if parts[0] else NO_EPOCH
    log_epoch = codec.unpack_epoch(parts[1]) if parts[1] else NO_EPOCH
    snapshot = codec.unpack_snapshot(parts[2]) if parts[2] else None
    records = tuple(codec.unpack_record(p) for p in parts[3:])
    applied = records[-1].lsn if records else (snapshot.lsn if snapshot else 0)
    ReplicaLog().restore(StoredHost(promised, log_epoch, applied, snapshot, records), 0.0)


def _saved_host_seeds() -> list[bytes]:
    recs = [m.Record(1, 0, m.GENESIS, MemberId("H1", 0), body=b"\x01" * 8),
            m.Record(2, 1, m.JOINED, _A, body=pack_groups([("g", 0)])),
            m.Record(3, 2, m.APP, _A, 1, 1, 0, b"x", "g", 1)]
    snap = m.Snapshot(1, 0, 0, (), (), (), 0, 77)
    parts = [codec.pack_epoch(_E), codec.pack_epoch(_E), b"",
             *(codec.pack_record(r) for r in recs)]
    with_snapshot = [codec.pack_epoch(_E), b"", codec.pack_snapshot(snap),
                     *(codec.pack_record(r) for r in recs[1:])]
    return [_SPLIT.join(parts), _SPLIT.join(with_snapshot), b""]


def _pieces(data: bytes) -> None:
    """Datagrams (``_SPLIT`` between them; the first byte of each picks one of four
    sources) fed to one socket's :class:`Reassembly` with small bounds: a malformed
    piece is refused and counted, the bounds hold after every datagram, and a frame
    put together is never larger than a UDP datagram."""
    r = Reassembly(max_frames=4, max_bytes=8192, timeout=1.0)
    datagrams = data.split(_SPLIT)
    for now, datagram in enumerate(datagrams):
        source = datagram[:1]
        try:
            frame = r.feed(source[0] & 3 if source else 0, datagram[1:], now / 4)
        except DecodeError:
            continue
        _bound(frame is None or len(frame) <= 65_507, "a frame put together")
        _bound(r.held_frames <= 4 and r.held_bytes <= 8192, "pieces held")
    _bound(r.stats.malformed + r.stats.pieces == len(datagrams), "every datagram counted")


def _pieces_seeds() -> list[bytes]:
    frame = encode(_seed_messages()[0]) + bytes(3000)
    pieces = cut(frame, 7, 600)
    return [_SPLIT.join(b"\x00" + p for p in pieces),
            _SPLIT.join(b"\x01" + p for p in reversed(pieces)) + _SPLIT + b"\x02" + pieces[0],
            b"\x00IM\x02\x00\x00\x00\x01\x05\x02xyz"]


def _bound(ok: bool, what: str) -> None:
    if not ok:
        raise AssertionError(f"{what} over its bound")


def _host_seeds() -> list[bytes]:
    def chunk(msg: Any, flags: int) -> bytes:
        body = encode_body(msg)
        return bytes((flags,)) + len(body).to_bytes(2, "big") + body

    msgs = _seed_messages()
    one = b"".join(chunk(x, 0x40 | (0 if i < 5 else 3)) for i, x in enumerate(msgs))
    return [one, b"".join(chunk(x, 0x20) for x in msgs[:5]) * 3, encode(msgs[0])]


def targets() -> list[FuzzTarget]:
    _sealed.wire = InfraWire(GroupAuth(  # type: ignore[attr-defined]
        INFRA_KEY_CONTEXT, _KEY, "H1", config=AuthConfig(replay_window=64, max_senders=4)))
    return [FuzzTarget("infra.sealed", _sealed, _sealed_seeds),
            FuzzTarget("infra.saved_host", _saved_host, _saved_host_seeds,
                       expected=(DecodeError, SavedStateError)),
            FuzzTarget("infra.host", _host, _host_seeds, expected=(),
                       max_len=_STREAM_MAX_LEN),
            FuzzTarget("infra.pieces", _pieces, _pieces_seeds, expected=(),
                       max_len=_STREAM_MAX_LEN)]
