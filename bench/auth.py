"""The cost of authenticating a group: throughput with a group key against without.

    .venv/bin/python bench/auth.py [--messages 20000] [--trials 5]

Two levels, each for payloads of 100 and 1000 bytes, in one process:

- ``codec``: encode group DATA messages with the group codec and decode them
  again (a sender's and a receiver's work), plainly, then sealed and opened by
  :class:`m2mc.security.GroupAuth` under each suite (HMAC-SHA256/128,
  AES-256-GCM, ChaCha20-Poly1305): the header gets the authentication flag,
  the body is sealed, the receiver opens it (tag, replay window) and decodes
  the body. The worst case: nothing else is on the path.
- ``m2mp``: the same, and each message also goes through a sending and a
  receiving M2MP layer (sans-IO, datagrams handed over in memory, no sockets).
- ``socket``: as ``m2mp``, and every datagram also crosses a real UDP socket
  on loopback (``sendto`` then ``recv``): what a message costs a node short of
  the event loop and the group core, so still a lower bound of the end-to-end ratio.

Plain and keyed runs alternate ``--trials`` times; rates are messages per CPU
second (``time.process_time``: other load on the machine moves them little) and
``ratio`` is the median over trials of keyed rate / plain rate of the same
trial. Target: ratio >= 0.7 with HMAC at the socket level (``meets_target``).
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from m2mc.group import codec
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.security import AuthConfig, GroupAuth, overhead
from m2mc.wire.m2mp import M2MPConfig, M2MPLayer, MessageReceived

SUITES = ("hmac-sha256", "aes-256-gcm", "chacha20-poly1305")
TARGET = 0.7


def frames(count: int, size: int) -> list[codec.Data]:
    rng = random.Random(size)
    return [codec.Data("node-a", [Message(MessageId("node-a", i + 1), ROOT, rng.randbytes(size))])
            for i in range(count)]


Carry = Callable[[bytes], bytes]


def direct(message: bytes) -> bytes:
    return message


def through_m2mp() -> Carry:
    """Send one message through a sending M2MP layer and a receiving one, in memory."""
    out = M2MPLayer(M2MPConfig(redundancy=1, flow_control=False), random.Random(1))
    into = M2MPLayer(M2MPConfig(redundancy=1, flow_control=False), random.Random(2))
    into.add_filter(b"")

    def carry(message: bytes) -> bytes:
        out.send(message, 0.0)
        for datagram in out.datagrams_to_send(0.0):
            into.receive_datagram(datagram, 0.0)
        (event,) = into.events()
        assert isinstance(event, MessageReceived)
        return event.payload

    return carry


def through_socket() -> Carry:
    """As :func:`through_m2mp`, each datagram also sent and read on a loopback socket."""
    out = M2MPLayer(M2MPConfig(redundancy=1, flow_control=False), random.Random(1))
    into = M2MPLayer(M2MPConfig(redundancy=1, flow_control=False), random.Random(2))
    into.add_filter(b"")
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.connect(receiver.getsockname())
    SOCKETS.extend((receiver, sender))

    def carry(message: bytes) -> bytes:
        out.send(message, 0.0)
        for datagram in out.datagrams_to_send(0.0):
            sender.send(datagram)
            into.receive_datagram(receiver.recv(2048), 0.0)
        (event,) = into.events()
        assert isinstance(event, MessageReceived)
        return event.payload

    return carry


SOCKETS: list[socket.socket] = []


def plain_run(tag: bytes, bodies: list[codec.Data], carry: Carry) -> float:
    encode, split, decode = codec.encode, codec.split_frame, codec.decode_body
    started = time.process_time()
    for body in bodies:
        frame = split(carry(encode(tag, body)))
        decode(frame.kind, frame.body)
    return len(bodies) / (time.process_time() - started)


def keyed_run(tag: bytes, bodies: list[codec.Data], suite: str, carry: Carry) -> float:
    key = bytes(range(32))
    sender = GroupAuth("bench", key, "node-a", config=AuthConfig(suite))
    receiver = GroupAuth("bench", key, "node-b", config=AuthConfig(suite))
    encode, decode = codec.encode, codec.decode_body
    flagged = codec.FLAG_AUTH
    size = codec.HEADER_SIZE
    started = time.process_time()
    for body in bodies:
        plain = encode(tag, body)
        header = plain[:size - 1] + bytes([plain[size - 1] | flagged])
        message = carry(sender.seal(header, plain[size:]))
        # Receiver: the fixed header as split_frame reads it, then the tag, then the body.
        kind = message[size - 2]
        opened = receiver.open(message, size)
        decode(kind, opened.body)
    return len(bodies) / (time.process_time() - started)


def measure(tag: bytes, bodies: list[codec.Data], trials: int,
            carrier: Callable[[], Carry]) -> dict[str, Any]:
    runs: dict[str, list[float]] = {"plain": [], **{s: [] for s in SUITES}}
    ratios: dict[str, list[float]] = {s: [] for s in SUITES}
    for _ in range(trials):
        plain = plain_run(tag, bodies, carrier())
        runs["plain"].append(plain)
        for suite in SUITES:
            keyed = keyed_run(tag, bodies, suite, carrier())
            runs[suite].append(keyed)
            ratios[suite].append(keyed / plain)
    return {"plain_msgs_per_cpu_s": round(statistics.median(runs["plain"])),
            **{suite: {"msgs_per_cpu_s": round(statistics.median(runs[suite])),
                       "ratio": round(statistics.median(ratios[suite]), 3)}
               for suite in SUITES}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--sizes", default="100,1000")
    args = parser.parse_args()
    tag = codec.group_tag("bench")
    sizes = [int(size) for size in args.sizes.split(",")]
    levels: dict[str, Callable[[], Carry]] = {"codec": lambda: direct, "m2mp": through_m2mp,
                                              "socket": through_socket}
    results: dict[str, dict[str, Any]] = {level: {} for level in levels}
    for size in sizes:
        bodies = frames(args.messages, size)
        for level, carrier in levels.items():
            results[level][f"{size}B"] = measure(tag, bodies, args.trials, carrier)
            for sock in SOCKETS:
                sock.close()
            SOCKETS.clear()

    def worst(level: str, suite: str) -> float:
        return min(float(r[suite]["ratio"]) for r in results[level].values())

    summary = {"bench": "auth", "messages": args.messages, "trials": args.trials,
               "overhead_bytes": overhead("node-a"), "results": results,
               "ratio_hmac": {level: worst(level, "hmac-sha256") for level in levels},
               "ratio_aead": {level: min(worst(level, s) for s in SUITES[1:])
                              for level in levels},
               "target": TARGET, "meets_target": worst("socket", "hmac-sha256") >= TARGET}
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
