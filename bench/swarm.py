"""Real processes at scale (issue 35, item 2): N member processes in N network
namespaces on one bridge, 10% loss on every link, a group of each order.

    sudo .venv/bin/python bench/swarm.py --members 20 [--orders sb,causal,total]
        [--send 3] [--size 100] [--loss 10] [--history 1000] [--analyze] [--keep DIR]
    sudo .venv/bin/python bench/swarm.py --members 20 --soak 3600 [--rate 5] [--sample 30]

Needs root, iproute2 and nftables (tests/netns/netns_lab.py builds the lab: a switch
namespace with a bridge, one namespace per member, loss by nftables on the bridge);
all traffic stays inside those namespaces. Each member is a process of
bench/swarm_node.py on the public API (``m2mc.api``), with its own durable log, and
writes a trace.

The run, ``N - 1`` members from the start and the N-th late:

1. For each order (S_b, causal, total), one at a time: the members join an ad hoc
   group of that order by name, and once each sees all of them, each sends
   ``--send`` messages of ``--size`` bytes (in the S_b group half of them answer
   one delivered lately), waits until it has delivered every member's, and leaves.
   The figures of the order are counted from the first send to the last member's
   last delivery.
2. History: the members join an S_b group and send ``--history`` messages in all.
   Then the N-th member starts, joins it, and catches up (MSP and repair); its time
   is measured from its join call (``join_to_caught_up_s``) and from the start of its
   process (``start_to_caught_up_s``).
3. The traces are judged by tests/group/tracecheck.py (the Spark-free mirror of
   ``m2mc analyze``'s checks, docs/interfaces.md §5), and with ``--analyze`` by
   ``m2mc analyze`` itself.

It prints one JSON object (the last line), per order: ``delivered_exactly_once_in_order``
(every member delivered every message once, no reply before its parent, and the
trace checks found nothing), ``datagrams_per_message_per_member`` (datagrams the
members put on the air, per message and member: the sum over the bridge's ports,
counted by nftables before the loss), ``received_per_message_per_member`` (datagrams
the bridge handed to the members, after the loss), ``air_per_payload`` (IP bytes on
the air per payload byte), ``per_second`` (the group messages of each kind all the
members sent, per second: NACKs, sync requests, advertisements, statuses, repairs),
``frames`` (those counts); and ``peak_rss_mib`` (VmHWM of each process: max,
median), ``late_join`` and ``checks``.

``--soak SECONDS``: the members (all N) chat in one S_b group at ``--rate`` messages a
second in all (half of them replies) for that long; every ``--sample`` seconds it
records every process's RSS and the size of every member's data directory, and
reports their growth per hour (least squares over the samples after the first
tenth of the run: median and largest over the members), the traffic's rates, and
whether every member delivered every message exactly once, parents first (counted
in each member; no trace is written unless ``--trace``).

Figures (2026-12-01, this repository's code at the commit that added this file;
a 2-core machine shared with other work, so times are loose; 10% loss, 3 messages
of 100 B per member and order, history 1,000 messages of 100 B)::

    command: sudo .venv/bin/python bench/swarm.py --members N

    N    order   exact  dgrams/msg/member  recv/msg/member  air/payload  NACK/s  sync/s  adv/s  status/s  secs
    (filled in below by the runs)

Late member: (below). Peak RSS per process: (below).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
# The namespace lab and the trace checker, shared with the tests (tests is no package).
sys.path[:0] = [str(ROOT / "tests" / "netns"), str(ROOT / "tests" / "group")]

import tracecheck  # noqa: E402  (the Spark-free mirror of m2mc analyze's checks)
from netns_lab import Host, Lab, LabUnavailable, rss_bytes  # noqa: E402
from netns_processes import M2MC, Lines, child_environment, wait_until  # noqa: E402

NODE = Path(__file__).with_name("swarm_node.py")
CHANNEL = "udp-multicast://239.255.90.35:47035?iface={address}&ttl=1"
ORDERS = ("sb", "causal", "total")
# Group messages by kind (their class names in m2mc.group.codec), per second in the report.
EXACT = {"short": 0, "duplicates": 0, "orphans": 0}  # what every member counted, at best
RATES = {"nack": "Nack", "sync_req": "SyncReq", "adv": "Adv", "status": "Status",
         "repair": "Repair", "sync_resp": "SyncResp", "grps_info": "GrpsInfo"}


@dataclass
class Member:
    """One member process and what it said (JSON lines on its stdout)."""

    pid: str
    host: Host
    data: Path
    process: subprocess.Popen[bytes]
    out: Lines
    said: list[dict[str, Any]] = field(default_factory=list)

    def tell(self, **cmd: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(cmd).encode() + b"\n")
        self.process.stdin.flush()

    def answers(self, ev: str, group: str | None = None) -> list[dict[str, Any]]:
        lines = self.out.snapshot()
        for line in lines[len(self.said):]:
            self.said.append(json.loads(line) if line.startswith("{") else {"ev": "?"})
        errors = [a for a in self.said if a["ev"] == "error"]
        if errors or self.process.poll() is not None:
            raise RuntimeError(f"member {self.pid}: {errors or 'exited'}; see {self.data}.log")
        return [a for a in self.said if a["ev"] == ev and (group is None or a["group"] == group)]


class Swarm:
    """The lab, its members, and the snapshots the figures are made of."""

    def __init__(self, lab: Lab, out: Path, env: dict[str, str], trace: bool) -> None:
        self.lab, self.out, self.env, self.trace = lab, out, env, trace
        self.members: list[Member] = []
        self.logs: list[IO[bytes]] = []

    def start(self, hosts: Iterable[Host]) -> list[Member]:
        started = []
        for host in hosts:
            pid = f"n{host.index:03d}"
            data = self.out / "data" / pid
            data.mkdir(parents=True)
            argv = [sys.executable, str(NODE), "--pid", pid, "--data", str(data),
                    "--channel", CHANNEL.format(address=host.address), "--run", "swarm"]
            if self.trace:
                argv += ["--trace", str(self.out / "trace")]
            log = (self.out / "data" / f"{pid}.log").open("wb")
            self.logs.append(log)
            process = self.lab.spawn(host, argv, env=self.env, stdin=subprocess.PIPE,
                                     stderr=log.fileno())
            started.append(Member(pid, host, data, process, Lines(process.stdout)))
        self.members += started
        return started

    def await_all(self, members: list[Member], ev: str, group: str | None, timeout: float,
                  count: int = 1) -> dict[str, dict[str, Any]]:
        """Each member's ``count``-th answer ``ev`` (about ``group``), by pid."""
        wait_until(lambda: all(len(m.answers(ev, group)) >= count for m in members),
                   f"{ev} {group or ''} from every member", timeout,
                   lambda: sorted(m.pid for m in members if len(m.answers(ev, group)) < count))
        return {m.pid: m.answers(ev, group)[count - 1] for m in members}

    def stats(self, members: list[Member]) -> dict[str, dict[str, Any]]:
        asked = {m.pid: len(m.answers("stats")) for m in members}
        for m in members:
            m.tell(cmd="stats")
        wait_until(lambda: all(len(m.answers("stats")) > asked[m.pid] for m in members),
                   "every member's stats", 60)
        return {m.pid: m.answers("stats")[-1] for m in members}

    def snapshot(self, members: list[Member]) -> Snapshot:
        return Snapshot(time.monotonic(), self.lab.udp_counters(), self.stats(members))

    def stop(self) -> dict[str, int]:
        """Close every member (end of its input), wait; their peak RSS (VmHWM), by pid."""
        peaks = {m.pid: rss_bytes(m.process.pid, "VmHWM") for m in self.members}
        for m in self.members:
            if m.process.stdin is not None and m.process.poll() is None:
                m.process.stdin.close()
        for m in self.members:
            try:
                m.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                m.process.kill()
        for log in self.logs:
            log.close()
        return peaks


@dataclass
class Snapshot:
    at: float
    air: dict[str, tuple[int, int]]
    stats: dict[str, dict[str, Any]]

    def frames(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for s in self.stats.values():
            total.update(s["frames"])
        return total


def traffic(before: Snapshot, after: Snapshot, messages: int, payload: int,
            members: int) -> dict[str, Any]:
    """What the members put on the air between two snapshots, per message and member."""
    seconds = after.at - before.at
    sent = [a - b for a, b in zip(after.air["sent"], before.air["sent"], strict=True)]
    got = [a - b for a, b in zip(after.air["delivered"], before.air["delivered"], strict=True)]
    frames = after.frames()
    frames.subtract(before.frames())
    return {
        "seconds": round(seconds, 2),
        "datagrams": sent[0], "air_bytes": sent[1], "delivered_datagrams": got[0],
        "datagrams_per_message": round(sent[0] / max(messages, 1), 2),
        "datagrams_per_message_per_member": round(sent[0] / max(messages * members, 1), 3),
        "received_per_message_per_member": round(got[0] / max(messages * members, 1), 3),
        "air_per_payload": round(sent[1] / max(payload, 1), 2),
        "per_second": {name: round(frames[kind] / seconds, 2) for name, kind in RATES.items()},
        "frames": {kind: n for kind, n in sorted(frames.items()) if n},
    }


def delivery(stats: dict[str, dict[str, Any]], gid: str, messages: int) -> dict[str, int]:
    """What the members counted of group ``gid``: short of ``messages``, copies, orphans."""
    groups = [s["groups"].get(gid, {}) for s in stats.values()]
    return {"short": sum(g.get("seen", 0) < messages for g in groups),
            "duplicates": sum(g.get("seen_duplicates", 0) for g in groups),
            "orphans": sum(g.get("orphans", 0) for g in groups)}


def shares(total: int, pids: list[str]) -> dict[str, int]:
    """``total`` messages cut among ``pids`` as evenly as can be."""
    base, extra = divmod(total, len(pids))
    return {pid: base + (i < extra) for i, pid in enumerate(pids)}


def run_group(swarm: Swarm, members: list[Member], gid: str, order: str,
              sends: dict[str, int], args: argparse.Namespace,
              replies: bool) -> tuple[dict[str, Any], Snapshot]:
    """Members join ``gid``, see each other, send ``sends`` each, deliver them all."""
    n = len(members)
    for m in members:
        m.tell(cmd="join", group=gid, order=order, members=n)
    joined = swarm.await_all(members, "members", gid, 120 + 3 * n)
    before = swarm.snapshot(members)
    for m in members:
        m.tell(cmd="send", group=gid, count=sends[m.pid], interval=args.interval,
               size=args.size, replies=replies)
        m.tell(cmd="expect", group=gid, **{"from": sends})
    swarm.await_all(members, "complete", gid, 180 + 3 * n)
    after = swarm.snapshot(members)
    messages = sum(sends.values())
    figures = {"order": order, "members": n, "messages": messages,
               "seconds_to_see_all_members": max(a["seconds"] for a in joined.values()),
               **traffic(before, after, messages, messages * args.size, n),
               "members_counted": delivery(after.stats, gid, messages)}
    return figures, after


def late_join(swarm: Swarm, early: list[Member], host: Host,
              args: argparse.Namespace) -> dict[str, Any]:
    """Phase 2: a history of ``--history`` messages, then the N-th member catches up."""
    gid = "swarm-history"
    sends = shares(args.history, [m.pid for m in early])
    history, _ = run_group(swarm, early, gid, "sb", sends, args, replies=True)
    before = swarm.snapshot(early)
    started = time.monotonic()
    late = swarm.start([host])
    swarm.await_all(late, "ready", None, 120)
    late[0].tell(cmd="join", group=gid, order="sb", members=len(early) + 1)
    late[0].tell(cmd="expect", group=gid, **{"from": sends})
    done = swarm.await_all(late, "complete", gid, 300)[late[0].pid]
    caught_up = time.monotonic() - started
    everyone = [*early, *late]
    after = swarm.snapshot(everyone)
    cost = traffic(before, after, args.history, args.history * args.size, len(everyone))
    return {"member": late[0].pid, "history": args.history,
            "join_to_caught_up_s": done["seconds"],
            "start_to_caught_up_s": round(caught_up, 2),
            "datagrams": cost["datagrams"], "air_bytes": cost["air_bytes"],
            "frames": cost["frames"],
            "members_counted": delivery({late[0].pid: after.stats[late[0].pid]}, gid,
                                        args.history),
            "history_phase": {k: history[k] for k in ("seconds", "datagrams_per_message_per_member",
                                                      "air_per_payload", "members_counted")}}


def judge(trace: Path, analyze: bool, env: dict[str, str]) -> dict[str, Any]:
    """The trace checks (tracecheck.py), by group; with ``analyze``, m2mc analyze's verdict."""
    found = tracecheck.check(tracecheck.load(trace))
    by_group: dict[str, dict[str, int]] = {}
    for check, items in found.items():
        for item in items:
            words = item.split()  # "node group mid ...", or "group gseq G is two messages"
            group = words[0] if item.endswith("is two messages") else words[1]
            by_group.setdefault(group, {}).setdefault(check, 0)
            by_group[group][check] += 1
    verdict: dict[str, Any] = {"tracecheck": {k: len(v) for k, v in found.items()},
                               "violations_by_group": by_group}
    if analyze:
        out = trace.parent / "analysis"
        done = subprocess.run([*M2MC, "analyze", str(trace), "--out", str(out), "--quiet"],
                              capture_output=True, text=True, env=env, check=False)
        verify = out / "verify.json"
        report = json.loads(verify.read_text()) if verify.exists() else {}
        verdict["analyze"] = {
            "exit": done.returncode, "valid": report.get("valid"),
            "violations": {k: c["violations"] for k, c in report.get("checks", {}).items()},
            "messages": report.get("counts", {}).get("messages")}
    return verdict


def peak_figures(peaks: dict[str, int]) -> dict[str, float]:
    mib = sorted(v / (1 << 20) for v in peaks.values() if v)
    return {"max": round(mib[-1], 1), "median": round(statistics.median(mib), 1),
            "min": round(mib[0], 1)} if mib else {}


def run(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The bench proper (phases 1-3 of the docstring): the report."""
    n = args.members
    env = child_environment(out)
    trace = out / "trace"
    trace.mkdir(parents=True)
    (trace / "run.json").write_text(json.dumps({"run": "swarm", "members": n,
                                                "loss": args.loss, "orders": args.orders}))
    lab = Lab(size=n, one_frame_per_datagram=True)
    started = time.monotonic()
    try:
        lab.create()
        lab.count_udp()
        lab.set_loss(args.loss)
        swarm = Swarm(lab, out, env, trace=True)
        report: dict[str, Any] = {"members": n, "loss_percent": args.loss, "send": args.send,
                                  "size": args.size, "lab_seconds": 0.0, "orders": {}}
        early = swarm.start(lab.hosts[:n - 1])
        swarm.await_all(early, "ready", None, 60 + 3 * n)
        report["lab_seconds"] = round(time.monotonic() - started, 1)
        pids = [m.pid for m in early]
        for order in args.orders:
            gid = f"swarm-{order}"
            figures, _ = run_group(swarm, early, gid, order, dict.fromkeys(pids, args.send),
                                   args, replies=order == "sb")
            for m in early:
                m.tell(cmd="leave", group=gid)
            swarm.await_all(early, "left", gid, 60)
            report["orders"][order] = figures
        if args.history:
            report["late_join"] = late_join(swarm, early, lab.hosts[n - 1], args)
        report["peak_rss_mib"] = peak_figures(swarm.stop())
    finally:
        lab.destroy()
    checks = report["checks"] = judge(trace, args.analyze, env)
    spark = checks.get("analyze", {"valid": True})["valid"] is True
    for order, figures in report["orders"].items():
        counted = figures["members_counted"]
        figures["delivered_exactly_once_in_order"] = (
            counted == EXACT and spark
            and not checks["violations_by_group"].get(f"swarm-{order}"))
    report["wall_seconds"] = round(time.monotonic() - started, 1)
    return report


def slope_per_hour(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) samples, per hour."""
    if len(samples) < 2:
        return 0.0
    mt = statistics.fmean(t for t, _ in samples)
    mv = statistics.fmean(v for _, v in samples)
    var = sum((t - mt) ** 2 for t, _ in samples)
    return sum((t - mt) * (v - mv) for t, v in samples) / var * 3600 if var else 0.0


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def growth(series: dict[str, list[tuple[float, float]]], skip: float) -> dict[str, float]:
    """MiB per hour over each member's samples after ``skip`` seconds: median and max."""
    rates = sorted(slope_per_hour([(t, v / (1 << 20)) for t, v in s if t >= skip])
                   for s in series.values())
    return {"median": round(statistics.median(rates), 2), "max": round(rates[-1], 2),
            "min": round(rates[0], 2)}


def series(rss: dict[str, list[tuple[float, float]]],
           disk: dict[str, list[tuple[float, float]]]) -> list[list[float]]:
    """Per sample: [seconds, median RSS, largest RSS, all data directories] (MiB)."""
    out = []
    for i, (t, _) in enumerate(next(iter(rss.values()))):
        sizes = [s[i][1] / (1 << 20) for s in rss.values()]
        out.append([round(t), round(statistics.median(sizes), 1), round(max(sizes), 1),
                    round(sum(s[i][1] for s in disk.values()) / (1 << 20), 1)])
    return out


def soak(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """``--soak``: a steady chat among all N members, sampled every ``--sample`` seconds."""
    n, gid = args.members, "swarm-chat"
    env = child_environment(out)
    lab = Lab(size=n, one_frame_per_datagram=True)
    rss: dict[str, list[tuple[float, float]]] = {}
    disk: dict[str, list[tuple[float, float]]] = {}
    try:
        lab.create()
        lab.count_udp()
        lab.set_loss(args.loss)
        swarm = Swarm(lab, out, env, trace=args.trace)
        members = swarm.start(lab.hosts)
        swarm.await_all(members, "ready", None, 60 + 3 * n)
        for m in members:
            m.tell(cmd="join", group=gid, order="sb", members=n)
        swarm.await_all(members, "members", gid, 120 + 3 * n)
        before = swarm.snapshot(members)
        for m in members:
            m.tell(cmd="chat", group=gid, rate=args.rate / n, size=args.size)
        end = before.at + args.soak
        while True:
            now = time.monotonic()
            for m in members:
                rss.setdefault(m.pid, []).append((now - before.at, rss_bytes(m.process.pid)))
                disk.setdefault(m.pid, []).append((now - before.at, dir_bytes(m.data)))
            for m in members:
                m.answers("?")  # (a member that died or reported an error ends the soak)
            if now >= end:
                break
            time.sleep(min(args.sample, end - now))
        for m in members:
            m.tell(cmd="hush", group=gid)
        sent = {pid: a["sent"] for pid, a in swarm.await_all(members, "hushed", gid, 60).items()}
        chatted = time.monotonic()
        for m in members:
            m.tell(cmd="expect", group=gid, **{"from": sent})
        swarm.await_all(members, "complete", gid, 300)
        settled = time.monotonic() - chatted
        after = swarm.snapshot(members)
        peaks = swarm.stop()
    finally:
        lab.destroy()
    messages = sum(sent.values())
    skip = args.soak / 10
    counted = delivery(after.stats, gid, messages)
    return {
        "members": n, "soak_seconds": args.soak, "rate": args.rate, "size": args.size,
        "loss_percent": args.loss, "messages": messages,
        "delivered_exactly_once_in_order": counted == EXACT,
        "members_counted": counted, "seconds_to_settle_after_chat": round(settled, 2),
        "traffic": traffic(before, after, messages, messages * args.size, n),
        "rss_mib": {"first": peak_figures({p: int(s[0][1]) for p, s in rss.items()}),
                    "last": peak_figures({p: int(s[-1][1]) for p, s in rss.items()}),
                    "peak": peak_figures(peaks),
                    "growth_per_hour": growth(rss, skip)},
        "data_dir_mib": {"last": peak_figures({p: int(s[-1][1]) for p, s in disk.items()}),
                         "growth_per_hour": growth(disk, skip)},
        "series": series(rss, disk),
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", type=int, default=20, help="N, member processes (20)")
    p.add_argument("--orders", type=lambda s: s.split(","), default=list(ORDERS),
                   help="comma-separated (sb,causal,total)")
    p.add_argument("--send", type=int, default=3, help="messages per member and order (3)")
    p.add_argument("--size", type=int, default=100, help="payload bytes (100)")
    p.add_argument("--interval", type=float, default=0.2, help="seconds between sends (0.2)")
    p.add_argument("--loss", type=int, default=10, help="percent lost on every link (10)")
    p.add_argument("--history", type=int, default=1000,
                   help="messages of history the late member catches up on (1000; 0: none)")
    p.add_argument("--analyze", action="store_true", help="also run m2mc analyze (Spark)")
    p.add_argument("--soak", type=float, default=0, metavar="SECONDS",
                   help="soak mode: a steady chat for this long instead of the phases")
    p.add_argument("--rate", type=float, default=5.0, help="soak: messages/s in all (5)")
    p.add_argument("--sample", type=float, default=30.0, help="soak: seconds between samples")
    p.add_argument("--trace", action="store_true", help="soak: write traces too")
    p.add_argument("--keep", type=Path, default=None, help="keep data, logs and traces here")
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if not 2 <= args.members <= 250:
        p.error("--members must be 2 to 250")
    bench: Callable[[argparse.Namespace, Path], dict[str, Any]] = soak if args.soak else run
    with tempfile.TemporaryDirectory(prefix="m2mc-swarm-") as tmp:
        out = args.keep or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        try:
            report = bench(args, out)
        except LabUnavailable as exc:
            print(f"swarm: {exc}", file=sys.stderr)
            return 2
    print(json.dumps(report))
    ok = all(f["delivered_exactly_once_in_order"] for f in report.get("orders", {}).values()) \
        and report.get("delivered_exactly_once_in_order", True) \
        and report.get("late_join", {}).get("members_counted", EXACT) == EXACT
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
