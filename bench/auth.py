"""The cost of authenticating a group: throughput with a group key against without.

    .venv/bin/python bench/auth.py [--messages 20000] [--trials 5] [--levels ...]

Five levels, each for payloads of 100 and 1000 bytes; the first four in one process:

- ``codec``: encode group DATA messages with the group codec and decode them
  again (a sender's and a receiver's work), plainly, then through
  :mod:`m2mc.group.groupwire` under each suite (HMAC-SHA256/128,
  AES-256-GCM, ChaCha20-Poly1305): ``seal_frame`` after encoding,
  ``open_frame`` (tag, replay window, the codec's header checks) before
  decoding the body. The worst case: nothing else is on the path.
- ``m2mp``: the same, and each message also goes through a sending and a
  receiving M2MP layer (sans-IO, datagrams handed over in memory, no sockets).
- ``socket``: as ``m2mp``, and every datagram also crosses a real UDP socket
  on loopback (``sendto`` then ``recv``).
- ``group``: two whole group stacks (:class:`~m2mc.group.manager.GroupNode`:
  GJLP, S_b ordering, repair, status, memory store) in one process, datagrams
  handed over in memory, the sender's loopback included; the receiver's
  delivered messages per CPU second of both stacks. The keyed run keys the group
  in the real GroupNode (``create_group``/``join_group`` with a
  :class:`~m2mc.security.keys.GroupSecret`): every message sealed in ``send_body``,
  opened in ``NodeReceive.on_message``.
- ``e2e``: ``m2mc bench throughput`` (separate receiver and sender processes,
  loopback multicast, SQLite log, asyncio API) plainly and with
  ``--key-passphrase`` (HMAC), alternating ``--e2e-trials`` times; its
  ``msgs_per_s`` (wall clock: the whole path, event loop and kernel included).

Plain and keyed runs alternate ``--trials`` times; rates of the in-process levels
are messages per CPU second (``time.process_time``: other load on the machine
moves them little) and ``ratio`` is the median over trials of keyed rate / plain
rate of the same trial. Target: ratio >= 0.7 with HMAC end to end and at the
group level (``meets_target``); the other levels show where the cost sits (the
less work on the path, the lower the ratio). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from m2mc.group import codec
from m2mc.group.events import Delivered
from m2mc.group.groupwire import open_frame, seal_frame
from m2mc.group.manager import GroupNode
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.security import AuthConfig, GroupAuth, GroupSecret, overhead
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
    started = time.process_time()
    for body in bodies:
        # The path a keyed group takes (m2mc.group.groupwire): seal, carry, open, decode.
        frame, _sender = open_frame(receiver, carry(seal_frame(sender, encode(tag, body))))
        decode(frame.kind, frame.body)
    return len(bodies) / (time.process_time() - started)


def group_run(count: int, size: int, suite: str | None) -> float:
    """Messages the receiver delivered per CPU second, two stacks in one process."""
    gc.collect()  # the garbage of earlier runs and levels is not this run's to collect
    a, b = GroupNode("node-a", rng=random.Random(1)), GroupNode("node-b", rng=random.Random(2))
    now = 0.0
    a.start(now)
    b.start(now)
    key = None if suite is None else GroupSecret(bytes(range(32)), suite)
    gid = a.create_group("bench", now, key=key)
    b.join_group(gid, now, order="sb", key=key)
    payloads = [random.Random(i).randbytes(size) for i in range(count)]
    delivered = 0

    def pump(now: float) -> None:
        nonlocal delivered
        moved = True
        while moved:
            moved = False
            for src, dst in ((a, b), (b, a)):
                for datagram in src.datagrams_to_send(now):
                    moved = True
                    dst.receive_datagram(datagram, now)
                    src.receive_datagram(datagram, now)  # the multicast loopback
            for event in b.events():
                if type(event) is Delivered:
                    delivered += 1
            a.events()

    pump(now)
    delivered = 0
    started = time.process_time()
    for payload in payloads:
        a.send(gid, payload, now)
        pump(now)
    while delivered < count:
        now += 0.01
        for n in (a, b):
            deadline = n.next_deadline()
            if deadline is not None and deadline <= now:
                n.on_timer(now)
        pump(now)
        if now > 600:
            raise RuntimeError(f"only {delivered} of {count} delivered")
    return count / (time.process_time() - started)


def measure_group(count: int, size: int, trials: int) -> dict[str, Any]:
    runs: dict[str, list[float]] = {"plain": [], **{s: [] for s in SUITES}}
    ratios: dict[str, list[float]] = {s: [] for s in SUITES}
    for _ in range(trials):
        plain = group_run(count, size, None)
        runs["plain"].append(plain)
        for suite in SUITES:
            keyed = group_run(count, size, suite)
            runs[suite].append(keyed)
            ratios[suite].append(keyed / plain)
    return {"plain_msgs_per_cpu_s": round(statistics.median(runs["plain"])),
            **{suite: {"msgs_per_cpu_s": round(statistics.median(runs[suite])),
                       "ratio": round(statistics.median(ratios[suite]), 3)}
               for suite in SUITES}}


def throughput_run(count: int, size: int, receivers: int, passphrase: str | None) -> float:
    """``m2mc bench throughput``'s msgs_per_s (0.0 if some receiver missed messages)."""
    command = [sys.executable, "-m", "m2mc.cli", "bench", "throughput", "--count", str(count),
               "--size", str(size), "--receivers", str(receivers)]
    if passphrase is not None:
        command += ["--key-passphrase", passphrase]
    env = {k: v for k, v in os.environ.items() if not k.startswith("M2MC_")}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError(f"bench throughput printed nothing: {done.stderr[-500:]}")
    result = json.loads(lines[-1])
    if result["received_min"] != count:
        print(f"warning: a receiver missed messages: {result}", file=sys.stderr)
    return float(result["msgs_per_s"])


def measure_e2e(count: int, size: int, receivers: int, trials: int) -> dict[str, Any]:
    plain_rates: list[float] = []
    keyed_rates: list[float] = []
    ratios: list[float] = []
    for _ in range(trials):
        plain = throughput_run(count, size, receivers, None)
        keyed = throughput_run(count, size, receivers, "bench passphrase")
        plain_rates.append(plain)
        keyed_rates.append(keyed)
        ratios.append(keyed / plain if plain else 0.0)
    return {"plain_msgs_per_s": round(statistics.median(plain_rates)),
            "hmac-sha256": {"msgs_per_s": round(statistics.median(keyed_rates)),
                            "ratio": round(statistics.median(ratios), 3),
                            "trial_ratios": [round(r, 3) for r in ratios]}}


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
    parser.add_argument("--levels", default="codec,m2mp,socket,group,e2e",
                        help="comma-separated subset of codec,m2mp,socket,group,e2e")
    parser.add_argument("--e2e-count", type=int, default=10_000,
                        help="messages per end-to-end run (m2mc bench throughput --count)")
    parser.add_argument("--e2e-receivers", type=int, default=2)
    parser.add_argument("--e2e-trials", type=int, default=5)
    args = parser.parse_args()
    tag = codec.group_tag("bench")
    sizes = [int(size) for size in args.sizes.split(",")]
    wanted = args.levels.split(",")
    carriers: dict[str, Callable[[], Carry]] = {"codec": lambda: direct, "m2mp": through_m2mp,
                                                "socket": through_socket}
    levels = {level: carrier for level, carrier in carriers.items() if level in wanted}
    results: dict[str, dict[str, Any]] = {
        level: {} for level in [*levels, *(x for x in ("group", "e2e") if x in wanted)]}
    for size in sizes:
        bodies = frames(args.messages, size)
        for level, carrier in levels.items():
            results[level][f"{size}B"] = measure(tag, bodies, args.trials, carrier)
            for sock in SOCKETS:
                sock.close()
            SOCKETS.clear()
        if "group" in results:
            results["group"][f"{size}B"] = measure_group(args.messages, size, args.trials)
        if "e2e" in results:
            results["e2e"][f"{size}B"] = measure_e2e(args.e2e_count, size, args.e2e_receivers,
                                                     args.e2e_trials)

    def worst(level: str, suite: str) -> float:
        return min(float(r[suite]["ratio"]) for r in results[level].values())

    judged = [level for level in ("group", "e2e") if level in results]
    summary = {"bench": "auth", "messages": args.messages, "trials": args.trials,
               "overhead_bytes": overhead("node-a"), "results": results,
               "ratio_hmac": {level: worst(level, "hmac-sha256") for level in results},
               "ratio_aead": {level: min(worst(level, s) for s in SUITES[1:])
                              for level in results if level != "e2e"},
               "target": TARGET,
               "meets_target": all(worst(level, "hmac-sha256") >= TARGET for level in judged)}
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
