"""The processes bench/peers.py starts for m2mc and raw UDP multicast (one role each).

    python bench/peers_roles.py m2mc-recv URL COUNT IDLE CAP WARMUP DATA_DIR MAX_PAYLOAD [OPTION...]
    python bench/peers_roles.py m2mc-send URL COUNT SIZE MEMBERS RATE DATA_DIR MAX_PAYLOAD [TICK]
                                [OPTION...]
    python bench/peers_roles.py raw-recv GROUP PORT COUNT SIZE IDLE CAP [DATAGRAM]
    python bench/peers_roles.py raw-send GROUP PORT COUNT SIZE [DATAGRAM]

m2mc is used exactly as an application would: a ``Node`` with ``data_dir`` (the
durable log), the group joined by name (S_b; ``order=total``: ad hoc total order;
``hosts=CELL,CELL,...``: a member in infrastructure mode, URL its own cell, in total
order), receivers reading with
``receive_many``, the sender calling ``await group.send(payload)`` in a loop and
never reading its group. Times are ``time.monotonic_ns()`` (CLOCK_MONOTONIC, the
clock Java's ``System.nanoTime()`` reads on Linux). A paced sender (RATE > 0)
stamps each message with its send time and number (12 bytes at the front) and,
when ahead of its schedule, sleeps at least TICK seconds (0: just until the next
message is due), then sends what came due meanwhile; a receiver then measures
send-to-delivery latency, the first WARMUP messages excluded. A receiver gives up
IDLE seconds after its last delivery, or CAP seconds after its first (the trial
then does not count). Each receiver prints one JSON line on stdout, a sender one
when it starts and one when it has sent everything; then each stays (answering
repairs) until its stdin is closed.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import socket
import struct
import sys
import time
from array import array
from typing import Any

STAMP = struct.Struct(">qI")  # send time (monotonic ns), message number
RAW_HEAD = struct.Struct(">IH")  # message number, part
RAW_END = 0xFFFFFFFF
RAW_PART = 65_000  # bytes of a message per datagram (a UDP datagram holds 65,507)
GROUP = "peers"
# Total order: the sender's first message, which it reads back before it starts the
# clock (the group can order once its log is founded: a group joined by name founds it
# after ``sequencer_timeout`` without one, docs/group.md section 5); receivers skip it.
READY = b"\xffpeers: ready"


def rank(sorted_values: list[int], q: float) -> int:
    """Nearest-rank percentile (PeersJGroups.java computes the same)."""
    if not sorted_values:
        return 0
    i = math.ceil(q * len(sorted_values)) - 1
    return sorted_values[max(0, min(i, len(sorted_values) - 1))]


def latency_summary(values: list[int]) -> dict[str, int]:
    values.sort()
    return {"n": len(values), "p50": rank(values, 0.50), "p99": rank(values, 0.99),
            "max": values[-1] if values else 0}


def nonzero(counters: dict[str, int]) -> dict[str, int]:
    """A node's counters that moved (losses, repairs, flow timeouts...), for the record."""
    return {name: value for name, value in sorted(counters.items()) if value}


def _wait_stdin_closed() -> None:
    while sys.stdin.buffer.read(256):
        pass


# --------------------------------------------------------------------------- m2mc
def options(words: list[str]) -> dict[str, str]:
    """``order=total`` and ``hosts=...`` after the positional arguments."""
    return dict(word.split("=", 1) for word in words)


def _node_config(url: str, data_dir: str, max_payload: int, hosts: str = "") -> Any:
    from m2mc.api import NodeConfig
    from m2mc.group.config import GroupConfig
    from m2mc.infra.config import MAX_PAYLOAD_LIMIT, InfraConfig

    if hosts:  # infrastructure mode: URL is this member's cell
        return NodeConfig(mode="infra", hosts=tuple(hosts.split(",")), infra_cell=url,
                          data_dir=data_dir,
                          # the API's body is the payload and a 1-byte prefix
                          infra=InfraConfig(max_payload=min(MAX_PAYLOAD_LIMIT,
                                                            max(60_000, max_payload + 1))))
    # Settings an application sending such messages would choose: payloads up to
    # the size it sends, and a durable log bounded at 1 GiB (64 KiB messages would
    # otherwise fill the disk: 400,000 of them are 26 GB per process).
    return NodeConfig(channel=url, data_dir=data_dir,
                      group=GroupConfig(max_payload=max(60_000, max_payload),
                                        retention_bytes=1 << 30))


async def m2mc_receiver(url: str, count: int, idle: float, cap: float, warmup: int,
                        data_dir: str, max_payload: int, opts: dict[str, str]) -> None:
    from m2mc.api import Node

    hosts = opts.get("hosts", "")
    async with Node(_node_config(url, data_dir, max_payload, hosts)) as node:
        group = await node.join(GROUP, order=opts.get("order", "sb"), timeout=60.0)
        print("ready", file=sys.stderr, flush=True)
        received = 0
        first = last = 0
        # An array, not a list: 360,000 ints in a list are traversed by every full
        # garbage collection of the receiver, a cost of the bench, not of m2mc.
        latencies = array("q")
        unpack = STAMP.unpack_from
        give_up = float("inf")
        while received < count:
            wait = min(idle, give_up - time.monotonic()) if received else 4 * idle
            try:
                batch = await group.receive_many(timeout=max(0.0, wait))
            except TimeoutError:
                break  # gave up: the trial does not count
            now = time.monotonic_ns()
            if not received and batch[0].data == READY:  # total order: first, not counted
                batch = batch[1:]
                if not batch:
                    continue
            if not first:
                give_up = time.monotonic() + cap
            if batch[0].data[:8] != b"\x00" * 8:  # stamped by a paced sender
                for m in batch:
                    sent, index = unpack(m.data)
                    if index >= warmup:
                        latencies.append(now - sent)
            received += len(batch)
            last = now
            first = first or now
        out: dict[str, Any] = {"received": received, "first": first, "last": last,
                               "cpu_s": round(time.process_time(), 2),
                               "counters": nonzero(node.stats())}
        if latencies:
            out["latency_ns"] = latency_summary(latencies.tolist())
        print(json.dumps(out), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, _wait_stdin_closed)


async def m2mc_sender(url: str, count: int, size: int, members: int, rate: float,
                      data_dir: str, max_payload: int, tick: float,
                      opts: dict[str, str]) -> None:
    from m2mc.api import Node

    hosts = opts.get("hosts", "")
    async with Node(_node_config(url, data_dir, max_payload, hosts)) as node:
        group = await node.join(GROUP, order=opts.get("order", "sb"), timeout=60.0)
        deadline = time.monotonic() + 60.0
        while len(group.members) < members and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        seen = len(group.members)
        if opts.get("order") == "total":  # as an application would: wait until it orders
            await group.send(READY)
            while not any(m.data == READY for m in await group.receive_many(timeout=60.0)):
                pass
        await asyncio.sleep(0.2)
        payload = os.urandom(size)
        payload = bytes(min(12, size)) + payload[12:]  # unstamped
        start = time.monotonic_ns()
        print(json.dumps({"start": start, "members": seen}), flush=True)
        if rate <= 0:
            for _ in range(count):  # the plain loop of an application: send, never read
                await group.send(payload)
        else:
            tail = payload[12:]
            interval = 1e9 / rate
            clock = time.monotonic_ns
            for i in range(count):
                wait = start + i * interval - clock()
                if wait > 0:
                    await asyncio.sleep(max(wait / 1e9, tick))
                await group.send(STAMP.pack(clock(), i) + tail)
        end = time.monotonic_ns()
        print(json.dumps({"start": start, "end": end, "members": seen,
                          "own_dropped": node.own_dropped,
                          "cpu_s": round(time.process_time(), 2),
                          "counters": nonzero(node.stats())}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, _wait_stdin_closed)


# ---------------------------------------------------------------------------- raw
def _raw_socket(group: str, port: int) -> socket.socket:
    from m2mc.transport.multicast import open_multicast_socket
    from m2mc.transport.url import parse_channel_url

    spec = parse_channel_url(f"udp-multicast://{group}:{port}?iface=127.0.0.1&ttl=1")
    sock = open_multicast_socket(spec)  # type: ignore[arg-type]
    sock.setblocking(True)
    return sock


def _parts(size: int, datagram: int = RAW_PART) -> int:
    """Datagrams of one message: each carries the 6-byte head and at most
    ``datagram`` bytes in all (RAW_PART: of the message only, as before raw508)."""
    room = datagram if datagram == RAW_PART else datagram - RAW_HEAD.size
    return max(1, math.ceil(size / room))


def raw_receiver(group: str, port: int, count: int, size: int, idle: float,
                 cap: float, datagram: int = RAW_PART) -> None:
    """Count messages whose every datagram arrived; losses are not repaired."""
    sock = _raw_socket(group, port)
    sock.settimeout(4 * idle)
    print("ready", file=sys.stderr, flush=True)
    parts = _parts(size, datagram)
    seen = bytearray(count)
    received = first = last = 0
    recv = sock.recv
    unpack = RAW_HEAD.unpack_from
    give_up = float("inf")
    while time.monotonic() < give_up:
        try:
            data = recv(65_536)
        except TimeoutError:
            break
        index, _ = unpack(data)
        if index == RAW_END:
            break
        if index < count:
            seen[index] += 1
            if seen[index] == parts:
                received += 1
                last = time.monotonic_ns()
                if not first:
                    first = last
                    give_up = time.monotonic() + cap
        sock.settimeout(idle)
    print(json.dumps({"received": received, "first": first, "last": last}), flush=True)
    _wait_stdin_closed()


def raw_sender(group: str, port: int, count: int, size: int, datagram: int = RAW_PART) -> None:
    sock = _raw_socket(group, port)
    parts = _parts(size, datagram)
    chunk = max(RAW_HEAD.size, size // parts)
    if datagram != RAW_PART:  # raw508: the head inside the datagram's bytes
        chunk = min(datagram, RAW_HEAD.size + -(-size // parts))
    body = os.urandom(chunk - RAW_HEAD.size)
    dest = (group, port)
    sendto = sock.sendto
    pack = RAW_HEAD.pack
    start = time.monotonic_ns()
    print(json.dumps({"start": start, "members": None}), flush=True)
    for i in range(count):
        for p in range(parts):
            sendto(pack(i, p) + body, dest)
    end = time.monotonic_ns()
    for _ in range(20):
        sendto(pack(RAW_END, 0), dest)
        time.sleep(0.01)
    print(json.dumps({"start": start, "end": end, "members": None}), flush=True)
    _wait_stdin_closed()


def main(argv: list[str]) -> int:
    role, rest = argv[0], argv[1:]
    if role == "m2mc-recv":
        asyncio.run(m2mc_receiver(rest[0], int(rest[1]), float(rest[2]), float(rest[3]),
                                  int(rest[4]), rest[5], int(rest[6]), options(rest[7:])))
    elif role == "m2mc-send":
        asyncio.run(m2mc_sender(rest[0], int(rest[1]), int(rest[2]), int(rest[3]),
                                float(rest[4]), rest[5], int(rest[6]), float(rest[7]),
                                options(rest[8:])))
    elif role == "raw-recv":
        raw_receiver(rest[0], int(rest[1]), int(rest[2]), int(rest[3]), float(rest[4]),
                     float(rest[5]), int(rest[6]) if len(rest) > 6 else RAW_PART)
    elif role == "raw-send":
        raw_sender(rest[0], int(rest[1]), int(rest[2]), int(rest[3]),
                   int(rest[4]) if len(rest) > 4 else RAW_PART)
    else:
        print(f"unknown role {role}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
