"""Throughput of the ordering cores (issue 3).

For each core and for 10^5 and 10^6 messages, 10% of which arrive just before
their predecessor (S_b parent, causal/FIFO: the sender's previous message,
total: the previous gseq), time ``receive`` over the whole arrival sequence and
print JSON: messages/s, and the ratio time(10^6)/time(10^5) (10 for a linear
core). The workload is generated before timing and frozen out of the garbage
collector, so only the core's own work is measured. A trivial loop over the
same messages is timed as the reference for this machine.

Targets: S_b >= 300,000 messages/s; ratio <= 12 for every core.

    .venv/bin/python bench/ordering.py [--sizes 100000 1000000] [--seed 1] [--strict]
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import sys
import time
from collections.abc import Callable

from m2mc.ordering import Message, make_core
from m2mc.ordering.workload import (
    causal_history,
    early_arrivals,
    fifo_stream,
    parent_index,
    previous_index,
    reply_tree,
    total_stream,
)

EARLY = 0.10
SB_TARGET = 300_000
RATIO_TARGET = 12.0


def arrivals(order: str, n: int, rng: random.Random) -> list[Message]:
    if order == "sb":
        sent = reply_tree(rng, n, senders=16)
        return early_arrivals(sent, parent_index(sent), EARLY, rng)
    if order == "causal":
        sent = causal_history(rng, n, senders=8, lag=20)
        return early_arrivals(sent, previous_index(sent), EARLY, rng)
    if order == "fifo":
        sent = fifo_stream(rng, n, senders=16)
        return early_arrivals(sent, previous_index(sent), EARLY, rng)
    if order == "total":
        sent = total_stream(rng, n, senders=16)
        return early_arrivals(sent, list(range(-1, n - 1)), EARLY, rng)
    raise ValueError(order)


def timed(loop: Callable[[], int]) -> tuple[float, int]:
    gc.collect()
    gc.freeze()  # the workload's objects are not the core's to scan
    try:
        start = time.perf_counter()
        delivered = loop()
        return time.perf_counter() - start, delivered
    finally:
        gc.unfreeze()


def measure(order: str, n: int, seed: int) -> dict[str, float | int]:
    messages = arrivals(order, n, random.Random(seed))
    core = make_core(order, max_held=n)
    receive = core.receive

    def run() -> int:
        delivered = 0
        for m in messages:
            delivered += len(receive(m))
        return delivered

    seconds, delivered = timed(run)
    if delivered != n or core.held_count != 0:
        raise SystemExit(f"{order}: delivered {delivered} of {n}, {core.held_count} held")

    def reference() -> int:  # the cheapest possible "core": remember each message
        seen: dict[int, Message] = {}
        for m in messages:
            seen[id(m)] = m
        return len(seen)

    ref_seconds, _ = timed(reference)
    return {"messages": n, "seconds": round(seconds, 4), "msgs_per_s": round(n / seconds),
            "reference_msgs_per_s": round(n / ref_seconds)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[100_000, 1_000_000])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--orders", nargs="+", default=["sb", "causal", "fifo", "total"])
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when a target is missed (timing on a shared machine is noisy)")
    args = parser.parse_args()
    small, large = args.sizes
    result: dict[str, object] = {
        "bench": "ordering",
        "python": platform.python_version(),
        "early_fraction": EARLY,
        "targets": {"sb_min_msgs_per_s": SB_TARGET, "max_ratio": RATIO_TARGET},
    }
    cores: dict[str, object] = {}
    ok = True
    for order in args.orders:
        a = measure(order, small, args.seed)
        b = measure(order, large, args.seed)
        ratio = round(float(b["seconds"]) / float(a["seconds"]), 2)
        expected_ratio = large / small
        ratio_ok = ratio <= RATIO_TARGET * expected_ratio / 10
        rate_ok = order != "sb" or min(int(a["msgs_per_s"]), int(b["msgs_per_s"])) >= SB_TARGET
        ok = ok and ratio_ok and rate_ok
        cores[order] = {str(small): a, str(large): b, "ratio": ratio,
                        "meets_targets": ratio_ok and rate_ok}
        print(f"{order}: {a['msgs_per_s']}/s, {b['msgs_per_s']}/s, ratio {ratio}",
              file=sys.stderr)
    result["cores"] = cores
    result["meets_targets"] = ok
    print(json.dumps(result, indent=2))
    return 0 if ok or not args.strict else 1


if __name__ == "__main__":
    raise SystemExit(main())
