"""Flood a multicast group with garbage and forged M2MP packets, as fast as one process can.

Run inside a lab namespace by tests/netns (never on a real network):
    python flood.py GROUP PORT IFACE [--seed N] [--forge-group GID] [--forge-keyed GID]
        [--forge-infra] [--also ADDR:PORT ...] [--capture-until FILE]
Stops on SIGTERM and prints ``{"sent": N, "errors": E, "captured": C}``.

The mix: random bytes of 0..700 bytes (some too short, some over 508), forged
fragments of messages that never complete (random IDs, fragment numbers, full
500-byte fragments: they fill the receiver's reassembly tables), pairs of
contradictory "last" fragments, and complete one-packet messages of random junk.
With ``--forge-group``, half the pool is well-formed group messages of that
group from invented processes: joins, status, sync requests and NACKs (which
ask the members for work), data with absurd sequence numbers, and floods of
invented groups on the discovery channel.

With ``--forge-keyed GID``, the group is keyed and the flooder has no key: half
the pool is sealed group messages of every kind, claiming the members' ids
(``--claim``) and invented ones, sealed under a wrong key (bad tags). With
``--forge-infra``, half the pool is infrastructure-mode frames of every kind from
invented members and hosts and claiming real ones: plain ones (with a valid
checksum) and ones sealed under a wrong key. ``--also`` adds destinations
(multicast groups or unicast addresses inside the lab, e.g. the hosts' uplinks),
each sent the whole pool in turn.

With ``--capture-until FILE``, the flooder first records what it hears on the
multicast destinations (it joins them) until FILE exists, then floods, and adds
to its pool every recorded datagram as is (a replay) and, for those that are a
whole one-packet M2MP message, a copy under a fresh message id (which M2MP
cannot drop as a repeat: the message reaches the group layer or the infra wire
and its replay window) and a copy with its last byte flipped (a bad tag).
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import socket
import struct
import sys

LAST = 0x8000_0000


def pool(rng: random.Random, size: int = 4096) -> list[bytes]:
    header = struct.Struct(">II").pack
    out: list[bytes] = []
    while len(out) < size:
        kind = rng.random()
        if kind < 0.3:
            out.append(rng.randbytes(rng.randrange(0, 701)))
        elif kind < 0.75:
            fragment = rng.randrange(0, 64)
            out.append(header(rng.getrandbits(32), fragment) + rng.randbytes(500))
        elif kind < 0.9:
            mid = rng.getrandbits(32)
            out.append(header(mid, 3 | LAST) + rng.randbytes(100))
            out.append(header(mid, 5 | LAST) + rng.randbytes(100))
        else:
            out.append(header(rng.getrandbits(32), 0 | LAST) + rng.randbytes(rng.randrange(200)))
    return out


def forged_group_messages(rng: random.Random, gid: str, size: int) -> list[bytes]:
    from m2mc.group import codec
    from m2mc.ordering import ROOT, Message, MessageId
    from m2mc.wire.packet import fragments

    tag = codec.group_tag(gid)
    out: list[bytes] = []
    while len(out) < size:
        pid = f"x{rng.getrandbits(24):06x}"
        kind = rng.randrange(7)
        body: codec.Body
        if kind == 0:
            body = codec.Join(pid, 1, "sb", "")
        elif kind == 1:
            body = codec.Status(pid, rng.randrange(1, 1 << 30),
                                {f"y{i}": rng.randrange(1, 1 << 30) for i in range(20)}, (),
                                None, 0)
        elif kind == 2:
            body = codec.SyncReq(pid, rng.randrange(1, 1 << 20), {})
        elif kind == 3:
            body = codec.Nack(pid, {p: [(1, 1 << 20)] for p in "abcd"}, [])
        elif kind == 4:
            body = codec.Data(pid, [Message(MessageId(pid, rng.randrange(1, 1 << 39)), ROOT,
                                            rng.randbytes(100))])
        elif kind == 5:
            body = codec.Data(pid, [Message(MessageId(pid, 1), MessageId(f"z{pid}", 7),
                                            rng.randbytes(50))])
        else:
            infos = tuple(codec.GrpInfo(f"spam/{rng.getrandbits(32)}", "", "sb", ())
                          for _ in range(10))
            out.extend(fragments(rng.getrandbits(32),
                                 codec.encode(codec.DISCOVERY_TAG, codec.GrpsInfo(pid, infos))))
            continue
        out.extend(fragments(rng.getrandbits(32), codec.encode(tag, body)))
    return out


WRONG_KEY = bytes(range(100, 132))  # not the group's: every tag made with it is bad


def forged_keyed_messages(rng: random.Random, gid: str, claim: list[str],
                          size: int) -> list[bytes]:
    """Sealed messages of every kind under a wrong key, claiming members and strangers."""
    from m2mc.group import codec
    from m2mc.group.groupwire import seal_frame
    from m2mc.ordering import ROOT, Message, MessageId
    from m2mc.security.auth import GroupAuth
    from m2mc.wire.packet import fragments

    tag = codec.group_tag(gid)
    sealers: dict[str, GroupAuth] = {}
    out: list[bytes] = []
    while len(out) < size:
        pid = rng.choice(claim) if claim and rng.random() < 0.5 else f"x{rng.getrandbits(24):06x}"
        sealer = sealers.get(pid)
        if sealer is None:
            sealer = sealers[pid] = GroupAuth(gid, WRONG_KEY, pid,
                                              counter_start=rng.getrandbits(40))
        seq = rng.randrange(1, 1 << 20)
        bodies: list[codec.Body] = [
            codec.Join(pid, 1, "sb", ""), codec.Leave(pid, 1 << 20),
            codec.Data(pid, [Message(MessageId(pid, seq), ROOT, rng.randbytes(100))]),
            codec.Repair(pid, [Message(MessageId(pid, seq), ROOT, rng.randbytes(50))]),
            codec.Status(pid, seq, {p: seq for p in claim}, (codec.MemberEntry(pid, 9, False),),
                         None, 0),
            codec.SyncReq(pid, seq, {}), codec.Nack(pid, {p: [(1, 1 << 20)] for p in claim}, []),
            codec.SyncResp(pid, rng.choice(claim or [pid]), 1,
                           [Message(MessageId(pid, seq), ROOT, b"x")], 0),
        ]
        frame = seal_frame(sealer, codec.encode(tag, rng.choice(bodies)))
        out.extend(fragments(rng.getrandbits(32), frame))
    return out


def forged_infra_frames(rng: random.Random, claim: list[str], size: int) -> list[bytes]:
    """Infrastructure frames of every kind: plain (valid checksum) and sealed under a
    wrong key, from invented members and hosts and claiming real ones."""
    from m2mc.infra import messages as m
    from m2mc.infra.ids import NO_EPOCH, Epoch, MemberId
    from m2mc.infra.wire import INFRA_KEY_CONTEXT, InfraWire
    from m2mc.security.auth import GroupAuth

    plain = InfraWire(None)
    out: list[bytes] = []
    while len(out) < size:
        who = rng.choice(claim) if claim and rng.random() < 0.5 else f"x{rng.getrandbits(24):06x}"
        me = MemberId(who, rng.randrange(1, 1 << 20))
        host = rng.choice(["H0", "H1", "H2", f"H{rng.getrandbits(16)}"])
        epoch = Epoch(rng.randrange(1, 1 << 20), 1.0, host)
        seq = rng.randrange(1, 1 << 20)
        rec = m.Record(seq, seq, m.APP, me, seq, seq, 0, rng.randbytes(60))
        msgs = [
            m.Hello(who, host, me, 0, False), m.JoinReq(who, host, seq, me),
            m.NewReq(who, host, seq, me, (m.NewItem(seq, seq, rng.randbytes(80)),)),
            m.NackReq(who, host, seq, me, 0, 1 << 20), m.LeaveReq(who, host, seq, me),
            m.Status(host, seq, "127.0.0.1", 7000, "cell", host, 0, (me,), "", NO_EPOCH,
                     NO_EPOCH, 0, 0, None),
            m.Replicate(epoch, seq, (rec,)), m.Commit(epoch, seq, seq),
            m.Takeover(epoch, host, 0), m.ElectStart(epoch),
        ]
        msg = rng.choice(msgs)
        if rng.random() < 0.5:
            out.append(plain.encode(msg))
        else:
            wire = InfraWire(GroupAuth(INFRA_KEY_CONTEXT, WRONG_KEY, who if rng.random() < 0.5
                                       else host, counter_start=rng.getrandbits(40)))
            out.append(wire.encode(msg))
    return out


def capture(groups: list[tuple[str, int]], iface: str, until: str,
            limit: int = 4000) -> list[bytes]:
    """Everything heard on the multicast ``groups`` until the file ``until`` exists."""
    import os
    import select

    socks = []
    for group, port in groups:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((group, port))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                        socket.inet_aton(group) + socket.inet_aton(iface))
        sock.setblocking(False)
        socks.append(sock)
    heard: list[bytes] = []
    while not os.path.exists(until):
        ready, _, _ = select.select(socks, [], [], 0.05)
        for sock in ready:
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            if len(heard) < limit:
                heard.append(data)
    for sock in socks:
        sock.close()
    return heard


def replays(rng: random.Random, heard: list[bytes]) -> list[bytes]:
    """The recorded datagrams as they were, and for whole one-packet M2MP messages a
    copy under a fresh message id and one with its last byte flipped."""
    out = list(heard)
    for datagram in heard:
        if len(datagram) > 8 and int.from_bytes(datagram[4:8], "big") == LAST:
            fresh = rng.getrandbits(32).to_bytes(4, "big") + datagram[4:]
            out.append(fresh)
            out.append(rng.getrandbits(32).to_bytes(4, "big") + datagram[4:-1]
                       + bytes((datagram[-1] ^ 0x5A,)))
    return out


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("group")
    parser.add_argument("port", type=int)
    parser.add_argument("iface")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--forge-group", default=None)
    parser.add_argument("--forge-keyed", default=None)
    parser.add_argument("--forge-infra", action="store_true")
    parser.add_argument("--claim", default="", help="ids of real members and hosts to claim")
    parser.add_argument("--also", action="append", default=[], type=_address)
    parser.add_argument("--capture-until", default=None)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    claim = [c for c in args.claim.split(",") if c]
    destinations = [(args.group, args.port), *args.also]
    heard: list[bytes] = []
    if args.capture_until:
        multicast = [d for d in destinations if 224 <= int(d[0].split(".")[0]) <= 239]
        print("capturing", file=sys.stderr, flush=True)
        heard = capture(multicast, args.iface, args.capture_until)
    datagrams = pool(rng)
    if args.forge_group:
        datagrams = datagrams[:2048] + forged_group_messages(rng, args.forge_group, 2048)
    if args.forge_keyed:
        datagrams = datagrams[:2048] + forged_keyed_messages(rng, args.forge_keyed, claim, 2048)
    if args.forge_infra:
        datagrams = datagrams[:2048] + forged_infra_frames(rng, claim, 2048)
    datagrams += replays(rng, heard)
    rng.shuffle(datagrams)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(args.iface))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
    running = True

    def stop(*_: object) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sent = errors = 0
    send = sock.sendto
    print("flooding", file=sys.stderr, flush=True)
    while running:
        for destination in destinations:
            for datagram in datagrams:
                try:
                    send(datagram, destination)
                    sent += 1
                except OSError:  # ENOBUFS when the interface queue is full: keep going
                    errors += 1
                if not running:
                    break
    print(json.dumps({"sent": sent, "errors": errors, "captured": len(heard)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
