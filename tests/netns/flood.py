"""Flood a multicast group with garbage and forged M2MP packets, as fast as one process can.

Run inside a lab namespace by tests/netns (never on a real network):
    python flood.py GROUP PORT IFACE [--seed N] [--forge-group GID]
Stops on SIGTERM and prints ``{"sent": N, "errors": E}``.

The mix: random bytes of 0..700 bytes (some too short, some over 508), forged
fragments of messages that never complete (random IDs, fragment numbers, full
500-byte fragments: they fill the receiver's reassembly tables), pairs of
contradictory "last" fragments, and complete one-packet messages of random junk.
With ``--forge-group``, half the pool is well-formed group messages of that
group from invented processes: joins, status, sync requests and NACKs (which
ask the members for work), data with absurd sequence numbers, and floods of
invented groups on the discovery channel.
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("group")
    parser.add_argument("port", type=int)
    parser.add_argument("iface")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--forge-group", default=None)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    datagrams = pool(rng)
    if args.forge_group:
        datagrams = datagrams[:2048] + forged_group_messages(rng, args.forge_group, 2048)
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
    destination = (args.group, args.port)
    sent = errors = 0
    send = sock.sendto
    print("flooding", file=sys.stderr, flush=True)
    while running:
        for datagram in datagrams:
            try:
                send(datagram, destination)
                sent += 1
            except OSError:  # ENOBUFS when the interface queue is full: keep going
                errors += 1
    print(json.dumps({"sent": sent, "errors": errors}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
