"""What a durable infrastructure host's write costs per record (docs/infra.md "Durable
hosts"; docs/decisions.md "Hosts keep their promise and their log", "A host's log is
checkpointed by a thread").

    .venv/bin/python bench/host_store.py [--records 20000] [--trials 3] [--body-bytes 100]
                                         [--batches 1,16,256]

A follower appends records as the master's ``Replicate`` frames bring them and, being
durable, commits one save per output step before its ``Accepted`` leaves. This bench
does exactly that with the real objects (``ReplicaLog`` with its journal,
``HostSaver``, ``SqliteHostStore``) for batches of 1, 16 and 256 records (one record
per step at a light load, a full ``Replicate`` frame at a heavy one), with bodies of
``--body-bytes`` (100; 64,000 for the largest messages), committing the tables as it
goes, and reports microseconds per record and, per configuration, the 99th percentile
and the longest of the commits (what the host's event loop waits for in one step):

* ``memory``: the same appends and commits on a memory-only log (the reference);
* ``sync_normal``: with a SQLite store, ``synchronous=NORMAL`` (survives ``kill -9``);
* ``sync_full``: ``synchronous=FULL`` (survives a power cut), the log copied into the
  database by the committing connection (SQLite's own checkpoint, as the simulator's
  hosts and the tools run);
* ``sync_full_thread``: the same with the checkpoint thread, as ``m2mc host`` runs.

Each configuration runs ``--trials`` times, alternating, and the median counts; the
ratios to ``memory`` (and of the thread to ``sync_full``) are what to compare across
machines. Prints one JSON object.
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


# configuration: (sync, checkpoint thread); None: no store
CONFIGS: dict[str, tuple[str, bool] | None] = {
    "memory": None, "sync_normal": ("normal", False), "sync_full": ("full", False),
    "sync_full_thread": ("full", True)}


def records(n: int, body: int) -> list[m.Record]:
    out = [m.Record(1, 1, m.JOINED, A, body=pack_groups(["g"]))]
    payload = bytes(range(256)) * (body // 256) + bytes(body % 256)
    out += [m.Record(i, i, m.APP, A, i - 1, i - 1, 0, payload, "g", i - 1)
            for i in range(2, n + 1)]
    return out


def run(recs: list[m.Record], batch: int, config: tuple[str, bool] | None,
        tmp: Path) -> tuple[float, list[float]]:
    """Seconds per record (append a batch, commit the tables up to it, save), and the
    seconds of each store commit."""
    log = ReplicaLog()
    log.promised = log.log_epoch = EPOCH
    saver = HostSaver(log) if config is not None else None
    store = (SqliteHostStore(tmp / f"{config[0]}-{batch}-{time.monotonic_ns()}.sqlite3", "H1",
                             sync=config[0], checkpoint_thread=config[1])
             if config is not None else None)
    commits: list[float] = []
    t0 = time.perf_counter()
    for i in range(0, len(recs), batch):
        chunk = recs[i:i + batch]
        log.append(chunk)
        log.commit_to(chunk[-1].lsn, 0.0)
        log.gc(chunk[-1].gseq)  # stable at once: checkpointed, kept as history
        if saver is not None and store is not None:
            save = saver.take()
            if save is not None:
                c0 = time.perf_counter()
                store.commit(save.record)
                commits.append(time.perf_counter() - c0)
    elapsed = time.perf_counter() - t0
    if store is not None:
        store.close()
    return elapsed / len(recs), commits


def tail_ms(commits: list[float]) -> dict[str, float]:
    if not commits:
        return {}
    ordered = sorted(commits)
    return {"p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1e3, 2),
            "max_ms": round(ordered[-1] * 1e3, 2)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=20000)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--body-bytes", type=int, default=100)
    p.add_argument("--batches", default="1,16,256", help="records per save (1,16,256)")
    args = p.parse_args()
    recs = records(args.records, args.body_bytes)
    out: dict[str, object] = {"bench": "host_store", "records": args.records,
                              "trials": args.trials, "body_bytes": args.body_bytes}
    with tempfile.TemporaryDirectory(prefix="m2mc-bench-host-store-") as d:
        tmp = Path(d)
        for batch in (int(b) for b in args.batches.split(",")):
            n = recs if batch > 1 else recs[:max(2, args.records // 10)]  # fsyncs are slow
            times: dict[str, list[float]] = {k: [] for k in CONFIGS}
            commits: dict[str, list[float]] = {k: [] for k in CONFIGS}
            for _ in range(args.trials):
                for name, config in CONFIGS.items():
                    per_record, each = run(n, batch, config, tmp)
                    times[name].append(per_record)
                    commits[name] += each
            us = {k: statistics.median(v) * 1e6 for k, v in times.items()}
            out[f"batch_{batch}"] = {
                "us_per_record": {k: round(v, 2) for k, v in us.items()},
                "commit": {k: tail_ms(v) for k, v in commits.items() if v},
                "ratio_normal_vs_memory": round(us["sync_normal"] / us["memory"], 1),
                "ratio_full_vs_memory": round(us["sync_full"] / us["memory"], 1),
                "ratio_full_thread_vs_full": round(us["sync_full_thread"] / us["sync_full"], 2)}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
