"""CPU per message of the group layer's send and receive paths, in one process.

Two :class:`~m2mc.group.manager.GroupNode` cores, each with its SQLite log, join an
S_b group over a direct hand-off of datagrams (no sockets, no event loop). The
sender sends ``--count`` messages of ``--size`` bytes, taking its datagrams and
committing every 256 sends as the driver would; the receiver takes them in
batches of 32 and commits after each. Reported: CPU microseconds per message on
each side, next to the reference measured in the same run, msgpack encoding and
decoding the same records (what the wire format alone costs), and their ratio.
This is the part of bench/peers.py's per-message cost that is the group layer's
own Python (docs/group.md section 11): the rest is sockets, asyncio and the kernel.

``--order total``: three nodes in a total-order group (``S`` the sender, ``Q`` the
group's creator, ``M``; one of ``Q`` and ``M`` is the sequencer the group's log
elects, the other a plain member), every node's datagrams handed
to the two others in rounds (the sender sends 256 messages a round, each node then
takes what the others sent, commits, and sends its own), until all three delivered
every message. Reported per role: CPU microseconds per message of the sender, the
sequencer and the member (``send_us``: the sender, ``sequencer_us``, ``receive_us``:
the member), so a change to the order's path is measured without sockets, load or
timing (the work is the same run after run).

    PYTHONPATH=src python bench/hotpath.py [--count 100000] [--size 100] [--trials 3]
        [--order sb|total]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgpack

from m2mc.group.manager import GroupNode
from m2mc.store.sqlite import SqliteStore
from m2mc.wire.m2mp import M2MPConfig

GID = "bench"


def node(pid: str, directory: Path) -> GroupNode:
    n = GroupNode(pid, rng=random.Random(pid), store=SqliteStore(directory / f"{pid}.db"),
                  m2mp_config=M2MPConfig(redundancy=1, flow_control=False))
    n.batch_deliveries = True  # as under the API
    return n


def joined(directory: Path) -> tuple[GroupNode, GroupNode]:
    sender, receiver = node("S", directory), node("R", directory)
    now = 1.0
    for n in (sender, receiver):
        n.start(now)
        n.join_group(GID, now, order="sb")
    for _ in range(50):  # discovery, joins, sync: until both see both
        now += 0.05
        for a, b in ((sender, receiver), (receiver, sender)):
            a.on_timer(now)
            out = a.datagrams_to_send(now)
            a.take_save(now)
            a.store.commit(now)
            b.receive_datagrams(out, now)
            b.events()
    if sorted(sender.members(GID)) != ["R", "S"] or sorted(receiver.members(GID)) != ["R", "S"]:
        raise SystemExit("the two nodes did not join each other's group")
    return sender, receiver


def trial(count: int, size: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="hotpath-") as tmp:
        sender, receiver = joined(Path(tmp))
        payload = os.urandom(size)
        now = 10.0
        datagrams: list[bytes] = []
        t0 = time.process_time()
        for i in range(count):
            sender.send(GID, payload, now)
            if i % 256 == 255:
                datagrams += sender.datagrams_to_send(now)
                sender.take_save(now)
                sender.store.commit(now)
                sender.events()
        datagrams += sender.datagrams_to_send(now)
        sender.take_save(now)
        sender.store.commit(now)
        t1 = time.process_time()
        delivered = 0
        for i in range(0, len(datagrams), 32):
            receiver.receive_datagrams(datagrams[i:i + 32], now)
            for event in receiver.events():
                delivered += len(getattr(event, "messages", ()))
            receiver.take_save(now)
            receiver.store.commit(now)
        t2 = time.process_time()
        if delivered != count:
            raise SystemExit(f"the receiver delivered {delivered} of {count}")
        # Reference: the records' wire encoding and decoding alone, in batches of 8.
        records = [["S", seq, "", 0, payload] for seq in range(1, count + 1)]
        t3 = time.process_time()
        packed = [msgpack.packb(records[i:i + 8]) for i in range(0, count, 8)]
        for blob in packed:
            msgpack.unpackb(blob)
        t4 = time.process_time()
        for n in (sender, receiver):
            n.store.close()
        return {"send_us": (t1 - t0) * 1e6 / count, "receive_us": (t2 - t1) * 1e6 / count,
                "msgpack_us": (t4 - t3) * 1e6 / count, "datagrams": len(datagrams)}


def total_trial(count: int, size: int) -> dict[str, float]:
    """One run of ``--order total`` (module docstring)."""
    with tempfile.TemporaryDirectory(prefix="hotpath-") as tmp:
        nodes = {pid: node(pid, Path(tmp)) for pid in ("Q", "S", "M")}
        cpu = dict.fromkeys(nodes, 0.0)
        inbox: dict[str, list[bytes]] = {pid: [] for pid in nodes}
        delivered = dict.fromkeys(nodes, 0)
        now = 1.0

        def turn(pid: str, timers: bool) -> None:
            n = nodes[pid]
            t0 = time.process_time()
            if timers:
                n.on_timer(now)
            got, inbox[pid] = inbox[pid], []
            for i in range(0, len(got), 32):
                n.receive_datagrams(got[i:i + 32], now)
            out = n.datagrams_to_send(now)
            n.take_save(now)
            n.store.commit(now)
            for event in n.events():
                delivered[pid] += len(getattr(event, "messages", ()))
            cpu[pid] += time.process_time() - t0
            for other in nodes:
                if other != pid:
                    inbox[other].extend(out)

        nodes["Q"].start(now)
        gid = nodes["Q"].create_group(GID, now, order="total")
        for pid in ("S", "M"):
            nodes[pid].start(now)
        for _ in range(40):
            now += 0.05
            for pid in nodes:
                turn(pid, True)
        for pid in ("S", "M"):
            nodes[pid].join_group(gid, now)
        for _ in range(80):  # discovery, joins, sync: until all see all
            now += 0.05
            for pid in nodes:
                turn(pid, True)
        if any(sorted(n.members(gid)) != ["M", "Q", "S"] for n in nodes.values()):
            raise SystemExit("the three nodes did not join each other's group")
        # The sequencer is the one the group's log elected (the creator founds the log,
        # then hands it to the member the election prefers): measured by its role.
        sequencers = [pid for pid, n in nodes.items() if n.groups[gid].mop.is_sequencer]
        if len(sequencers) != 1 or sequencers[0] == "S":
            raise SystemExit(f"expected one sequencer other than the sender: {sequencers}")
        seq = sequencers[0]
        member = next(pid for pid in nodes if pid not in ("S", seq))
        payload = os.urandom(size)
        cpu = dict.fromkeys(nodes, 0.0)
        delivered = dict.fromkeys(nodes, 0)
        sender = nodes["S"]
        sent = rounds = 0
        while min(delivered.values()) < count:
            rounds += 1
            if rounds > count:  # (a round delivers hundreds: this is a stall)
                raise SystemExit(f"stalled: delivered {delivered} of {count}")
            now += 0.001
            t0 = time.process_time()
            for _ in range(min(256, count - sent)):
                sender.send(gid, payload, now)
                sent += 1
            cpu["S"] += time.process_time() - t0
            for pid in ("S", "Q", "M"):
                turn(pid, rounds % 10 == 0)
        for n in nodes.values():
            n.store.close()
        return {"send_us": cpu["S"] * 1e6 / count, "sequencer_us": cpu[seq] * 1e6 / count,
                "receive_us": cpu[member] * 1e6 / count, "rounds": rounds}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--order", choices=("sb", "total"), default="sb")
    args = parser.parse_args(argv)
    if args.count < 1 or args.trials < 1 or not 0 <= args.size <= 60_000:
        parser.error("count and trials >= 1, size 0..60000")
    if args.order == "total":
        total = [total_trial(args.count, args.size) for _ in range(args.trials)]
        result: dict[str, Any] = {"bench": "hotpath", "order": "total", "count": args.count,
                                  "size": args.size, "trials": args.trials,
                                  "python": sys.version.split()[0]}
        for key in ("send_us", "sequencer_us", "receive_us"):
            values = [r[key] for r in total]
            result[key] = round(statistics.median(values), 3)
            result[f"{key}_range"] = [round(min(values), 3), round(max(values), 3)]
        print(json.dumps(result, indent=1))
        return 0
    runs = [trial(args.count, args.size) for _ in range(args.trials)]
    out: dict[str, Any] = {"bench": "hotpath", "count": args.count, "size": args.size,
                           "trials": args.trials, "python": sys.version.split()[0],
                           "datagrams": runs[0]["datagrams"]}
    for key in ("send_us", "receive_us", "msgpack_us"):
        values = [r[key] for r in runs]
        out[key] = round(statistics.median(values), 3)
        out[f"{key}_range"] = [round(min(values), 3), round(max(values), 3)]
    out["send_vs_msgpack"] = round(out["send_us"] / out["msgpack_us"], 2)
    out["receive_vs_msgpack"] = round(out["receive_us"] / out["msgpack_us"], 2)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
