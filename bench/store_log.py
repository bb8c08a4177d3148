"""What bounding a node's write-ahead log costs its commits (docs/decisions.md, "A node's
write-ahead log is bounded at 4 MiB").

A node's store (``SqliteStore(checkpoint_thread=True)``) commits ``--commits`` times one
100-byte message, in a loop, with its log started over at the bound a node now uses
(``THREAD_AUTOCHECKPOINT_BYTES``, 4 MiB) and, side by side in the same run, at the
reference, the 32 MiB a node used before (``AUTOCHECKPOINT_BYTES``): the two alternate,
each in a process of its own, ``--rounds`` times. Reported per bound: each commit's
wall time (median, 99th and 99.9th percentiles, longest, and how many took over 2 ms,
the stalls of the committing connection's own checkpoint) and the largest log file
seen; then the ratio of the bounded run to the reference for each figure.

    python bench/store_log.py [--commits 20000] [--rounds 2] [--dir /var/tmp]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def one_run(bound: int, commits: int, where: str) -> dict[str, Any]:
    from m2mc.ordering.ids import Message, MessageId
    from m2mc.store.sqlite import PAGE_SIZE, SqliteStore

    with tempfile.TemporaryDirectory(dir=where) as d:
        path = Path(d) / "m.sqlite3"
        wal = Path(d) / "m.sqlite3-wal"
        store = SqliteStore(path, clock=time.time, checkpoint_thread=True,
                            wal_autocheckpoint=bound // PAGE_SIZE)
        times: list[float] = []
        largest = 0
        for seq in range(1, commits + 1):
            store.put("g", Message(MessageId("p", seq), payload=os.urandom(100)), True)
            started = time.perf_counter()
            store.commit(time.time())
            times.append(time.perf_counter() - started)
            if seq % 64 == 0:
                largest = max(largest, wal.stat().st_size)
        store.close()
    times.sort()
    n = len(times)
    return {"bound_mib": bound >> 20, "commits": n,
            "p50_us": round(1e6 * times[n // 2], 1),
            "p99_us": round(1e6 * times[int(n * 0.99)], 1),
            "p999_us": round(1e6 * times[int(n * 0.999)], 1),
            "max_ms": round(1e3 * times[-1], 2),
            "over_2ms": sum(t > 0.002 for t in times),
            "largest_log_mib": round(largest / 2**20, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", default=tempfile.gettempdir(),
                        help="where the stores are written (default: the temporary directory)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child: its bound
    args = parser.parse_args()
    if args.commits < 1000 or args.rounds < 1:
        parser.error("--commits must be at least 1000 and --rounds at least 1")
    if args.one is not None:
        print(json.dumps(one_run(args.one, args.commits, args.dir)))
        return
    from m2mc.store.checkpointer import AUTOCHECKPOINT_BYTES, THREAD_AUTOCHECKPOINT_BYTES

    runs: dict[str, list[dict[str, Any]]] = {"bounded": [], "reference": []}
    for _ in range(args.rounds):
        for name, bound in (("reference", AUTOCHECKPOINT_BYTES),
                            ("bounded", THREAD_AUTOCHECKPOINT_BYTES)):
            done = subprocess.run([sys.executable, __file__, "--one", str(bound),
                                   "--commits", str(args.commits), "--dir", args.dir],
                                  capture_output=True, text=True, check=True)
            runs[name].append(json.loads(done.stdout))
    figures = ("p50_us", "p99_us", "p999_us", "max_ms", "over_2ms", "largest_log_mib")
    medians = {name: {f: statistics.median(r[f] for r in rs) for f in figures}
               for name, rs in runs.items()}
    ratio = {f: (round(medians["bounded"][f] / medians["reference"][f], 2)
                 if medians["reference"][f] else None) for f in figures}
    print(json.dumps({"runs": runs, "medians": medians, "bounded_over_reference": ratio},
                     indent=1))


if __name__ == "__main__":
    main()
