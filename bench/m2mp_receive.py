"""CPU per message of the M2MP layer's receive path, with runs and without them,
and with each read's packets joined.

One process, no sockets: a sender's packets for ``--count`` messages of ``--size``
bytes are fed to a fresh receiving :class:`~m2mc.wire.m2mp.M2MPLayer` in batches of
``--batch`` (what one read of the multicast channel brings with segmentation
offload), each message sent ``--redundancy`` times. The reference, in the same run,
is the same layer with runs turned off (every packet through the per-fragment path,
as before runs existed; docs/m2mp.md, "Packets, redundancy, reassembly"). Then
each batch as a reader with receive offload gets it (full packets in a row and the
shorter one after them, as one ``Segments``; docs/m2mp.md, "Segmentation offload"):
handed to the layer joined, against the same batch cut into its packets first, as
the channel did before (the cut timed with the layer). Trials alternate; reported:
the median of each, and the ratios.

    PYTHONPATH=src python bench/m2mp_receive.py [--size 65536] [--count 2000]
                                                [--batch 64] [--redundancy 1] [--trials 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from typing import Any

from m2mc.wire.m2mp import M2MPConfig, M2MPLayer
from m2mc.wire.packet import MAX_PACKET
from m2mc.wire.segments import Segments, split_blocks

MAX_JOINED = 64  # packets per read at most (one segmentation-offload run)


def packets(size: int, count: int, redundancy: int) -> list[bytes]:
    sender = M2MPLayer(M2MPConfig(redundancy=redundancy, flow_control=False), random.Random(1))
    payload = os.urandom(size)
    out: list[bytes] = []
    for _ in range(count):
        sender.send(payload, 0.0)
        out += sender.datagrams_to_send(0.0)
    return out


def joined(batch: list[bytes]) -> list[bytes]:
    """``batch`` as one read with receive offload brings it: full packets in a row,
    and the shorter one after them, as one Segments (at most MAX_JOINED)."""
    out: list[bytes] = []
    i = 0
    while i < len(batch):
        j = i
        while j < len(batch) and j - i < MAX_JOINED and len(batch[j]) == MAX_PACKET:
            j += 1
        if i < j < len(batch) and j - i < MAX_JOINED:
            j += 1
        out.append(Segments(b"".join(batch[i:j])) if j - i > 1 else batch[i])
        i = max(j, i + 1)
    return out


def trial(batches: list[list[bytes]], count: int, runs: bool, cut: bool = False) -> float:
    receiver = M2MPLayer(M2MPConfig(), random.Random(2))
    receiver.add_filter(b"")
    if not runs:
        receiver._run_end = 0  # no fragment number is below it: no run begins
    delivered = 0
    start = time.process_time()
    for batch in batches:
        receiver.receive_datagrams(split_blocks(batch) if cut else batch, 1.0)
        delivered += len(receiver.events())
    elapsed = time.process_time() - start
    if delivered != count:
        raise SystemExit(f"delivered {delivered} of {count}")
    return elapsed * 1e6 / count


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=65_536)
    parser.add_argument("--count", type=int, default=2_000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--redundancy", type=int, default=1)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args(argv)
    if min(args.count, args.batch, args.redundancy, args.trials) < 1 or args.size < 0:
        parser.error("count, batch, redundancy and trials >= 1, size >= 0")
    datagrams = packets(args.size, args.count, args.redundancy)
    batches = [datagrams[i:i + args.batch] for i in range(0, len(datagrams), args.batch)]
    reads = [joined(batch) for batch in batches]
    with_runs: list[float] = []
    without: list[float] = []
    cut: list[float] = []
    kept: list[float] = []
    for _ in range(args.trials):
        without.append(trial(batches, args.count, runs=False))
        with_runs.append(trial(batches, args.count, runs=True))
        cut.append(trial(reads, args.count, runs=True, cut=True))
        kept.append(trial(reads, args.count, runs=True))
    out: dict[str, Any] = {
        "bench": "m2mp_receive", "size": args.size, "count": args.count,
        "batch": args.batch, "redundancy": args.redundancy, "trials": args.trials,
        "datagrams": len(datagrams), "python": sys.version.split()[0],
        "runs_us_per_message": round(statistics.median(with_runs), 2),
        "runs_range": [round(min(with_runs), 2), round(max(with_runs), 2)],
        "per_fragment_us_per_message": round(statistics.median(without), 2),
        "per_fragment_range": [round(min(without), 2), round(max(without), 2)],
        "joined_us_per_message": round(statistics.median(kept), 2),
        "joined_range": [round(min(kept), 2), round(max(kept), 2)],
        "cut_then_runs_us_per_message": round(statistics.median(cut), 2),
        "cut_then_runs_range": [round(min(cut), 2), round(max(cut), 2)],
    }
    out["speedup"] = round(out["per_fragment_us_per_message"] / out["runs_us_per_message"], 2)
    out["joined_speedup"] = round(out["cut_then_runs_us_per_message"]
                                  / out["joined_us_per_message"], 2)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
