"""Flood a multicast group with garbage and forged M2MP packets, as fast as one process can.

Run inside a lab namespace by tests/netns (never on a real network):
    python flood.py GROUP PORT IFACE [--seed N]
Stops on SIGTERM and prints ``{"sent": N, "errors": E}``.

The mix: random bytes of 0..700 bytes (some too short, some over 508), forged
fragments of messages that never complete (random IDs, fragment numbers, full
500-byte fragments: they fill the receiver's reassembly tables), pairs of
contradictory "last" fragments, and complete one-packet messages of random junk.
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("group")
    parser.add_argument("port", type=int)
    parser.add_argument("iface")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    datagrams = pool(random.Random(args.seed))
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
