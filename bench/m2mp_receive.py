"""CPU per message of the M2MP layer's receive path, with runs and without them.

One process, no sockets: a sender's packets for ``--count`` messages of ``--size``
bytes are fed to a fresh receiving :class:`~m2mc.wire.m2mp.M2MPLayer` in batches of
``--batch`` (what one read of the multicast channel brings with segmentation
offload), each message sent ``--redundancy`` times. The reference, in the same run,
is the same layer with runs turned off (every packet through the per-fragment path,
as before runs existed; docs/m2mp.md, "Packets, redundancy, reassembly"). Trials
alternate; reported: the median of each, and their ratio.

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


def packets(size: int, count: int, redundancy: int) -> list[bytes]:
    sender = M2MPLayer(M2MPConfig(redundancy=redundancy, flow_control=False), random.Random(1))
    payload = os.urandom(size)
    out: list[bytes] = []
    for _ in range(count):
        sender.send(payload, 0.0)
        out += sender.datagrams_to_send(0.0)
    return out


def trial(datagrams: list[bytes], count: int, batch: int, runs: bool) -> float:
    receiver = M2MPLayer(M2MPConfig(), random.Random(2))
    receiver.add_filter(b"")
    if not runs:
        receiver._run_end = 0  # no fragment number is below it: no run begins
    delivered = 0
    start = time.process_time()
    for i in range(0, len(datagrams), batch):
        receiver.receive_datagrams(datagrams[i:i + batch], 1.0)
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
    with_runs: list[float] = []
    without: list[float] = []
    for _ in range(args.trials):
        without.append(trial(datagrams, args.count, args.batch, runs=False))
        with_runs.append(trial(datagrams, args.count, args.batch, runs=True))
    out: dict[str, Any] = {
        "bench": "m2mp_receive", "size": args.size, "count": args.count,
        "batch": args.batch, "redundancy": args.redundancy, "trials": args.trials,
        "datagrams": len(datagrams), "python": sys.version.split()[0],
        "runs_us_per_message": round(statistics.median(with_runs), 2),
        "runs_range": [round(min(with_runs), 2), round(max(with_runs), 2)],
        "per_fragment_us_per_message": round(statistics.median(without), 2),
        "per_fragment_range": [round(min(without), 2), round(max(without), 2)],
    }
    out["speedup"] = round(out["per_fragment_us_per_message"] / out["runs_us_per_message"], 2)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
