"""What a durable infrastructure host's write costs per record (docs/infra.md "Durable
hosts"; docs/decisions.md "Hosts keep their promise and their log").

    .venv/bin/python bench/host_store.py [--records 20000] [--trials 3]

A follower appends records as the master's ``Replicate`` frames bring them and, being
durable, commits one save per output step before its ``Accepted`` leaves. This bench
does exactly that with the real objects (``ReplicaLog`` with its journal,
``HostSaver``, ``SqliteHostStore``) for batches of 1, 16 and 256 records (one record
per step at a light load, a full ``Replicate`` frame at a heavy one), with 100-byte
bodies, committing the tables as it goes, and reports microseconds per record:

* ``memory``: the same appends and commits on a memory-only log (the reference);
* ``sync_normal``: with a SQLite store, ``synchronous=NORMAL`` (survives ``kill -9``);
* ``sync_full``: ``synchronous=FULL`` (the default: survives a power cut).

Each configuration runs ``--trials`` times, alternating, and the median counts; the
ratios to ``memory`` are what to compare across machines. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from m2mc.infra import messages as m
from m2mc.infra.host_durable import HostSaver
from m2mc.infra.ids import Epoch, MemberId
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.state import pack_groups
from m2mc.infra_runtime.host_store import SqliteHostStore

EPOCH = Epoch(1, 0.0, "H1")
A = MemberId("A", 1)


def records(n: int) -> list[m.Record]:
    out = [m.Record(1, 1, m.JOINED, A, body=pack_groups(["g"]))]
    out += [m.Record(i, i, m.APP, A, i - 1, i - 1, 0, b"x" * 100, "g", i - 1)
            for i in range(2, n + 1)]
    return out


def run(recs: list[m.Record], batch: int, sync: str | None, tmp: Path) -> float:
    """Seconds per record: append a batch, commit the tables up to it, save."""
    log = ReplicaLog()
    log.promised = log.log_epoch = EPOCH
    saver = HostSaver(log) if sync is not None else None
    store = (SqliteHostStore(tmp / f"{sync}-{batch}-{time.monotonic_ns()}.sqlite3", "H1",
                             sync=sync) if sync is not None else None)
    t0 = time.perf_counter()
    for i in range(0, len(recs), batch):
        chunk = recs[i:i + batch]
        log.append(chunk)
        log.commit_to(chunk[-1].lsn, 0.0)
        log.gc(chunk[-1].gseq)  # stable at once: checkpointed, kept as history
        if saver is not None and store is not None:
            save = saver.take()
            if save is not None:
                store.commit(save.record)
    elapsed = time.perf_counter() - t0
    if store is not None:
        store.close()
    return elapsed / len(recs)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=20000)
    p.add_argument("--trials", type=int, default=3)
    args = p.parse_args()
    recs = records(args.records)
    out: dict[str, object] = {"bench": "host_store", "records": args.records,
                              "trials": args.trials, "body_bytes": 100}
    with tempfile.TemporaryDirectory(prefix="m2mc-bench-host-store-") as d:
        tmp = Path(d)
        for batch in (1, 16, 256):
            n = recs if batch > 1 else recs[:max(2, args.records // 10)]  # fsyncs are slow
            times: dict[str, list[float]] = {"memory": [], "sync_normal": [], "sync_full": []}
            for _ in range(args.trials):
                times["memory"].append(run(n, batch, None, tmp))
                times["sync_normal"].append(run(n, batch, "normal", tmp))
                times["sync_full"].append(run(n, batch, "full", tmp))
            us = {k: statistics.median(v) * 1e6 for k, v in times.items()}
            out[f"batch_{batch}"] = {
                "us_per_record": {k: round(v, 2) for k, v in us.items()},
                "ratio_normal_vs_memory": round(us["sync_normal"] / us["memory"], 1),
                "ratio_full_vs_memory": round(us["sync_full"] / us["memory"], 1)}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
