"""m2mc next to JGroups 2.12 (its default udp.xml, and udp.xml with SEQUENCER for total
order) and raw UDP multicast, same run.

    python bench/peers.py [--sizes 100,65536] [--counts 100000,400000] [--trials 3]
                          [--receivers 3] [--latency-seconds 10] [--latency-trials 3]
                          [--latency-rate R] [--pace-ticks 0.001,0] [--no-latency]
                          [--quick]

One sender process and ``--receivers`` receiver processes of each system move
``count`` messages of ``size`` bytes, in a network namespace the bench creates
(``unshare -rn``) with only the loopback interface up:

* ``m2mc`` through its public API as an application uses it (bench/peers_roles.py):
  each process a ``Node`` with ``data_dir`` (the durable SQLite log, bounded at
  1 GiB), the S_b group joined by name, receivers reading with ``receive_many``,
  the sender calling ``await group.send(payload)`` in a loop and never reading
  (``NodeConfig`` defaults otherwise, ``max_payload`` raised for 64 KiB; M2MP packets
  of 508 bytes unless ``--m2mc-packet`` names more, the channel URL's ``packet=``);
  loopback multicast 239.255.x.y, iface 127.0.0.1, TTL 1;
* ``m2mc-total``: the same with the group joined in ad hoc total order
  (``order="total"``, docs/group.md section 5: a sequencer whose log a majority of
  the members commits); before the clock starts the sender sends one message and
  reads it back, as an application waits for the group to order (a group joined by
  name founds its log after ``sequencer_timeout``, 4 s, without one: measured from
  the first send, that wait cut the rate to a third and put 1.6 s on the p50);
* ``m2mc-infra``: infrastructure mode (docs/infra.md): 3 ``m2mc host`` processes on
  loopback, each with its log on disk (``--data-dir``, ``--sync full``) and one cell
  (239.255.x.y), and the sender and receivers as ``Node(NodeConfig(mode="infra",
  ...))`` members spread over the cells, with ``data_dir``, in total order (the same
  first message read back; messages of less than 65,000 bytes, each travels whole
  in a datagram with the API's 1-byte prefix: run ``--sizes 64000`` to set it
  against the others near 64 KiB);
* ``jgroups``: JGroups 2.12 from jgroups.jar with its default stack (``udp.xml``
  inside the jar: UDP multicast, NAKACK, UNICAST, STABLE, GMS, UFC/MFC, FRAG2,
  bundling), driven by bench/jgroups/PeersJGroups.java, compiled with ``javac``
  into a temporary directory at the start; ``-Djava.net.preferIPv4Stack=true
  -Djgroups.bind_addr=127.0.0.1 -Djgroups.udp.mcast_addr=239.255.x.y
  -Djgroups.udp.ip_ttl=1``, JVM defaults otherwise; the sender's own copies come
  back to it (JGroups' default) and are not read;
* ``jgroups-seq``: the same with total order, the stack JGroups gives it with:
  ``udp.xml`` from the jar with ``<SEQUENCER />`` added above ``pbcast.GMS``, a file
  the bench writes at the start (``-Dpeers.stack=FILE``);
* ``raw``: ``sendto`` of each message as datagrams (65,000 bytes of a message at
  most per datagram, so 64 KiB is two) on loopback multicast, ``recv`` counting
  the messages whose every datagram arrived; nothing is repaired, the loss is
  reported;
* ``raw508``: the same in datagrams of at most 508 bytes, M2MP's packet size
  (interfaces.md section 1: 131 datagrams for 64 KiB): what Python and the kernel
  do at the packet size m2mc's wire allows, where ``raw`` and JGroups send 64 KB
  datagrams that the IP layer fragments.

Throughput: a receiver's rate is the messages it delivered divided by the time
from the sender's first send to its last delivery (one clock for every process:
CLOCK_MONOTONIC, Python's ``time.monotonic_ns()`` and Java's ``System.nanoTime()``,
checked at the start); the slowest receiver counts. MB/s are 10^6 payload bytes
per second. An m2mc or JGroups trial counts only if every receiver delivered
every message. The systems take turns in every trial (the first one rotates) so
they see the same machine load; each figure is the median of the trials, with
their range, and ``ratio_m2mc_jgroups``, ``ratio_m2mc_total_jgroups_seq``,
``ratio_m2mc_infra_jgroups_seq`` (each m2mc system against the JGroups stack with
its guarantee), ``ratio_m2mc_raw`` and ``ratio_m2mc_raw508`` divide the medians.

Latency under load: for each size the sender of m2mc and of JGroups is paced at
half of that system's own best median rate above (or, without a complete trial at
that size, the rate its incomplete trials delivered at), or at ``--latency-rate`` for
every system when given, for ``--latency-seconds``, once for each of
``--pace-ticks``. Both senders pace the same way: ahead of schedule, each sleeps
at least the tick, then sends what came due meanwhile, each message stamped when
it is actually sent. Tick 0 (sleep until the next message is due) paces message
by message; tick 1 ms sends in bursts a millisecond apart, the finest an asyncio
program can sleep (its epoll timeout is whole milliseconds: a shorter sleep is
woken by the m2mc sender's own looped-back packets and spins, a whole core at
60,000 msg/s). Both are reported, the rows apart (``pace_tick_s``). Each
message carries its send time, and each receiver takes the time it is delivered
(m2mc: when ``receive_many`` returns it; JGroups: its ``receive`` callback). p50
and p99 per receiver, the first 10 % of the messages left out (warm-up); the
worst receiver counts, median of ``--latency-trials`` alternating trials.

Before each trial the bench flushes what earlier trials wrote to the disk
(``os.sync``; each trial's ``sync_before_s``), so that no trial pays for the last
one's writes. A receiver gives up ``--trial-seconds`` (300) after its first
delivery: such a trial does not count (its partial rate is shown for
information). The full default matrix (100 B and 64 KiB, 100,000 and 400,000
messages, 3 trials, then latency) took about 70 minutes on this 2-core machine
with the four S_b and raw systems, before the three total-order ones came (``--systems``
picks),
most of it at 64 KiB, where m2mc (about 100 messages/s there) and JGroups at
400,000 run into that limit; it writes up to 4 GiB of m2mc logs (temporary,
removed after each trial). ``--quick`` (100 B, 5,000 messages, one trial, 3 s
latency runs) takes about 30 s; ``--sizes 65536 --counts 5000 --no-latency`` about
5 minutes.
If Java, javac or jgroups.jar are missing, or the namespace cannot be made, the
JSON says why and no ratio is made up. The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROLES = HERE / "peers_roles.py"
JAVA_SOURCE = HERE / "jgroups" / "PeersJGroups.java"
PYTHON = sys.executable
IN_NAMESPACE = "PEERS_BENCH_NETNS"
IDLE = 20.0  # a receiver that delivers nothing for this long gives up (trial void)
SYSTEMS = ("m2mc", "m2mc-total", "m2mc-infra", "jgroups", "jgroups-seq", "raw", "raw508")
RAW = ("raw", "raw508")  # nothing repaired: their trials count whatever arrived
# Each m2mc system and the JGroups stack that gives the same guarantee: S_b against
# the default stack (FIFO per sender, reliable), total order against SEQUENCER.
PEERS = {"m2mc": "jgroups", "m2mc-total": "jgroups-seq", "m2mc-infra": "jgroups-seq"}
INFRA_HOSTS = 3
INFRA_MAX_PAYLOAD = 65_000  # m2mc.infra.config.MAX_PAYLOAD_LIMIT
M2MP_PACKET = 508  # raw508's largest datagram: an M2MP packet's (interfaces.md section 1)
NETNS_SETUP = ('ip link set lo up || exit 3; ip route add 224.0.0.0/4 dev lo 2>/dev/null; '
               'exec "$@"')


# ----------------------------------------------------------------------- processes
class Proc:
    """A child process whose output lines are collected by reader threads."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.command = command
        self.out: list[str] = []
        self.err: list[str] = []
        self.changed = threading.Condition()
        for pipe, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._pump, args=(pipe, lines), daemon=True).start()

    def _pump(self, pipe: Any, lines: list[str]) -> None:
        for line in pipe:
            with self.changed:
                lines.append(line.rstrip("\n"))
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def wait_for(self, predicate: Any, deadline: float) -> bool:
        with self.changed:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not predicate()):
                    return bool(predicate())
                self.changed.wait(min(left, 0.5))
            return True

    def ready(self, deadline: float) -> bool:
        return self.wait_for(lambda: any(line.strip() == "ready" for line in self.err), deadline)

    def result(self, deadline: float) -> dict[str, Any] | None:
        self.wait_for(lambda: self._json() is not None, deadline)
        return self._json()

    def _json(self) -> dict[str, Any] | None:
        for line in reversed(self.out):
            if line.startswith("{"):
                try:
                    value = json.loads(line)
                except ValueError:
                    continue
                return value if isinstance(value, dict) else None
        return None

    def stop(self, terminate: bool = False) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        if terminate:  # a server (an m2mc host) runs until SIGTERM
            self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def tail(self) -> str:
        return " | ".join(self.err[-3:])[-300:]


def child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("M2MC_")}


# ------------------------------------------------------------------------- jgroups
def prepare_jgroups(jar: str, workdir: str) -> dict[str, Any]:
    """Compile PeersJGroups.java against ``jar``: {"java": [...command...], ...} or
    {"error": why}."""
    java, javac = shutil.which("java"), shutil.which("javac")
    if java is None or javac is None:
        return {"error": "java or javac is not installed (apt-get install default-jdk-headless)"}
    if not Path(jar).is_file():
        return {"error": f"{jar} not found (apt-get install libjgroups-java)"}
    classes = Path(workdir) / "classes"
    proc = subprocess.run([javac, "-d", str(classes), "-cp", jar, str(JAVA_SOURCE)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": f"javac failed: {proc.stderr.strip()[-300:]}"}
    version = subprocess.run([java, "-cp", jar, "org.jgroups.Version"], capture_output=True,
                             text=True).stdout.strip().splitlines()
    java_version = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    stack = Path(workdir) / "udp-sequencer.xml"
    try:
        stack.write_text(sequencer_stack(jar))
    except (KeyError, OSError, zipfile.BadZipFile, ValueError) as error:
        return {"error": f"cannot write udp.xml plus SEQUENCER: {error}"}
    return {"sequencer_stack": str(stack),
            "java": [java, "-Djava.net.preferIPv4Stack=true",
                     "-Djgroups.bind_addr=127.0.0.1", "-Djgroups.udp.ip_ttl=1",
                     "-cp", f"{classes}{os.pathsep}{jar}", "PeersJGroups"],
            "version": version[0].split()[-1] if version else "?",
            "java_version": java_version.strip().splitlines()[0] if java_version else "?",
            "stack": "udp.xml inside jgroups.jar (new JChannel())",
            "stack_total_order": "the same plus <SEQUENCER/> above pbcast.GMS (jgroups-seq)"}


def sequencer_stack(jar: str) -> str:
    """JGroups' default stack with total order: udp.xml from the jar, ``SEQUENCER``
    added right above ``pbcast.GMS`` (where the jar's own sequencer.xml has it)."""
    with zipfile.ZipFile(jar) as archive:
        text = archive.read("udp.xml").decode()
    stack, found = re.subn(r"(<pbcast\.GMS\b[^>]*/>)", r"\1\n    <SEQUENCER />", text, count=1)
    if not found:
        raise ValueError("no pbcast.GMS in udp.xml")
    return stack


def clock_check(java: list[str] | None) -> dict[str, Any]:
    """Java's System.nanoTime() read between two time.monotonic_ns(): the same clock."""
    if java is None:
        return {"checked": False}
    before = time.monotonic_ns()
    out = subprocess.run([*java, "clock"], capture_output=True, text=True).stdout.strip()
    after = time.monotonic_ns()
    try:
        middle = int(out)
    except ValueError:
        return {"checked": False, "error": f"no clock from java: {out[:100]!r}"}
    return {"checked": True, "common": before <= middle <= after,
            "python_before_ns": before, "java_ns": middle, "python_after_ns": after}


# -------------------------------------------------------------------------- trials
def infra_hosts(size: int, group: str, port: int,
                tmp: str) -> tuple[list[str], list[list[str]]]:
    """The cells and the commands of INFRA_HOSTS ``m2mc host`` processes on loopback,
    each with its log on disk (``--data-dir``, ``--sync full``: written and synced
    before it answers, docs/infra.md "Durable hosts"). Cell i is multicast group
    239.255.(x+i).y (``group`` is 239.255.x.y), port ``port + i``."""
    _, _, third, fourth = (int(x) for x in group.split("."))
    cells = [f"udp-multicast://239.255.{(third + i - 1) % 254 + 1}.{fourth}:{port + i}"
             "?iface=127.0.0.1&ttl=1" for i in range(INFRA_HOSTS)]
    backbone = [f"127.0.0.1:{port + 100 + i}" for i in range(INFRA_HOSTS)]
    config = Path(tmp) / "hosts.toml"
    config.write_text(f"[infra]\nmax_payload = {min(INFRA_MAX_PAYLOAD, max(60_000, size + 1))}\n")
    hosts = []
    for i in range(INFRA_HOSTS):
        peers = [x for j, p in enumerate(backbone) if j != i for x in ("--peer", p)]
        hosts.append([PYTHON, "-m", "m2mc.cli", "host", "--id", f"H{i + 1}",
                      "--listen", backbone[i], "--cell", cells[i], "--config", str(config),
                      "--data-dir", str(Path(tmp) / f"H{i + 1}"), "--sync", "full", *peers])
    return cells, hosts


def commands(system: str, size: int, count: int, rate: float, receivers: int,
             ctx: dict[str, Any], tmp: str
             ) -> tuple[list[list[str]], list[list[str]], list[str]]:
    """(servers started first, receivers, the sender)."""
    rng: random.Random = ctx["rng"]
    group = f"239.255.{rng.randrange(1, 255)}.{rng.randrange(1, 255)}"
    port = rng.randrange(20000, 60000)
    warmup = count // 10 if rate > 0 else count
    cap = ctx["trial_seconds"]
    roles = [PYTHON, str(ROLES)]
    servers: list[list[str]] = []
    if system.startswith("m2mc"):
        url = f"udp-multicast://{group}:{port}?iface=127.0.0.1&ttl=1"
        if ctx["m2mc_packet"] != M2MP_PACKET:  # the user's option (docs/m2mp.md)
            url += f"&packet={ctx['m2mc_packet']}"
        urls = [url] * (receivers + 1)
        extra = [] if system == "m2mc" else ["order=total"]
        if system == "m2mc-infra":
            cells, servers = infra_hosts(size, group, port, tmp)
            urls = [cells[i % len(cells)] for i in range(receivers + 1)]
            extra.append(f"hosts={','.join(cells)}")
        recv = [[*roles, "m2mc-recv", urls[i], str(count), str(IDLE), str(cap), str(warmup),
                 str(Path(tmp) / f"r{i}"), str(size), *extra] for i in range(receivers)]
        send = [*roles, "m2mc-send", urls[receivers], str(count), str(size),
                str(receivers + 1), str(rate), str(Path(tmp) / "s"), str(size),
                str(ctx["pace_tick"]), *extra]
    elif system.startswith("jgroups"):
        stack = ([f"-Dpeers.stack={ctx['jgroups']['sequencer_stack']}"]
                 if system == "jgroups-seq" else [])
        java = [*ctx["jgroups"]["java"][:-1], f"-Djgroups.udp.mcast_addr={group}",
                f"-Djgroups.udp.mcast_port={port}", *stack, ctx["jgroups"]["java"][-1]]
        recv = [[*java, "recv", str(count), str(IDLE), str(cap), str(warmup)]
                for _ in range(receivers)]
        send = [*java, "send", str(count), str(size), str(receivers + 1), str(rate),
                str(ctx["pace_tick"])]
    else:
        datagram = [str(M2MP_PACKET)] if system == "raw508" else []
        recv = [[*roles, "raw-recv", group, str(port), str(count), str(size), "3.0", str(cap),
                 *datagram] for _ in range(receivers)]
        send = [*roles, "raw-send", group, str(port), str(count), str(size), *datagram]
    return servers, recv, send


def run_trial(system: str, size: int, count: int, rate: float, receivers: int,
              ctx: dict[str, Any]) -> dict[str, Any]:
    if system == "m2mc-infra" and size >= INFRA_MAX_PAYLOAD:
        return {"error": f"infrastructure mode carries messages of less than "
                         f"{INFRA_MAX_PAYLOAD} bytes (one datagram each, with the API's "
                         "1-byte prefix): --sizes 64000"}
    timeout = ctx["trial_seconds"] + 2 * IDLE + 60.0  # the receivers give up before
    # What earlier trials wrote (an m2mc trial at 64 KiB leaves about 800 MB of logs in
    # the page cache, deleted with its directory) goes to the disk now, not during this
    # trial: each trial starts on a quiet disk, whichever system it is.
    started = time.monotonic()
    os.sync()
    synced = time.monotonic() - started
    with tempfile.TemporaryDirectory(prefix=f"peers-{system}-", dir=ctx["tmp"]) as tmp:
        server_cmds, recv_cmds, send_cmd = commands(system, size, count, rate, receivers,
                                                    ctx, tmp)
        env = child_env()
        procs: list[Proc] = []
        servers: list[Proc] = []
        try:
            servers = [Proc(cmd, env) for cmd in server_cmds]
            procs = [Proc(cmd, env) for cmd in recv_cmds]
            deadline = time.monotonic() + 90.0
            for p in procs:
                if not p.ready(deadline):
                    return {"error": f"a receiver did not start: {p.tail()}"}
            sender = Proc(send_cmd, env)
            procs.append(sender)
            deadline = time.monotonic() + timeout
            results = [p.result(deadline) for p in procs[:receivers]]
            sender.wait_for(lambda: any('"end"' in line for line in sender.out),
                            time.monotonic() + 5.0)
            sent = sender.result(time.monotonic())  # its last line ("end" once all sent)
        finally:
            for p in procs:
                p.stop()
            for p in servers:
                p.stop(terminate=True)
    if sent is None:
        return {"error": f"the sender did not start within {timeout:.0f} s: {sender.tail()}"}
    return {**summarize(system, size, count, sent, results, rate),
            "sync_before_s": round(synced, 2)}


def summarize(system: str, size: int, count: int, sent: dict[str, Any],
              results: list[dict[str, Any] | None], rate: float) -> dict[str, Any]:
    start = sent["start"]
    got = [r["received"] if r else 0 for r in results]
    rates = [r["received"] / ((r["last"] - start) / 1e9)
             if r and r["received"] and r["last"] > start else 0.0 for r in results]
    lasts = [r["last"] for r in results if r and r["last"]]
    out: dict[str, Any] = {
        "msgs_per_s": round(min(rates), 1), "mb_per_s": round(min(rates) * size / 1e6, 2),
        "per_receiver_msgs_per_s": [round(x, 1) for x in rates], "received": got,
        "complete": min(got) == count,
        "seconds": round((max(lasts) - start) / 1e9, 3) if lasts else None,
        "send_seconds": round((sent["end"] - start) / 1e9, 3) if "end" in sent else None}
    if sent.get("members") is not None:
        out["sender_saw_members"] = sent["members"]
    if system in RAW:
        out["loss_max"] = round(1 - min(got) / count, 4)
    if rate > 0:
        lat = [r["latency_ns"] for r in results if r and "latency_ns" in r]
        if "end" in sent:
            out["achieved_send_rate"] = round(count / max(1e-9, (sent["end"] - start) / 1e9), 1)
        if len(lat) == len(results):
            out["latency_ms"] = {
                "p50": round(max(x["p50"] for x in lat) / 1e6, 3),
                "p99": round(max(x["p99"] for x in lat) / 1e6, 3),
                "per_receiver": [{k: (round(v / 1e6, 3) if k != "n" else v)
                                  for k, v in x.items()} for x in lat]}
    return out


# ------------------------------------------------------------------------ summaries
def median_range(trials: list[dict[str, Any]], key: str, reliable: bool) -> dict[str, Any]:
    good = [t for t in trials if "error" not in t and (t.get("complete") or not reliable)]
    values = [t[key] for t in good if t.get(key) is not None]
    out: dict[str, Any] = {"trials_counted": len(values), "trials": trials}
    if values:
        out[key] = statistics.median(values)
        out["range"] = [min(values), max(values)]
    else:
        errors = [t.get("error") or "a receiver did not deliver every message within the "
                  "trial's time (--trial-seconds)" for t in trials]
        out[key] = None
        out["error"] = errors[0] if errors else "not run"
    partial = [t[key] for t in trials if "error" not in t and reliable and not t.get("complete")
               and t.get(key)]
    if partial:  # for information only: these trials do not count
        out[f"incomplete_trials_{key}"] = partial
    return out


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def throughput(args: argparse.Namespace, systems: list[str],
               ctx: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for size in args.sizes:
        for count in args.counts:
            runs: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
            for trial in range(args.trials):
                order = systems[trial % len(systems):] + systems[:trial % len(systems)]
                for system in order:
                    result = run_trial(system, size, count, 0.0, args.receivers, ctx)
                    runs[system].append(result)
                    log(f"size {size} count {count} trial {trial + 1} {system}: "
                        f"{result.get('msgs_per_s', result.get('error'))}")
            row: dict[str, Any] = {"size": size, "count": count}
            for system in SYSTEMS:
                if system in runs:
                    row[system] = median_range(runs[system], "msgs_per_s", system not in RAW)
                    if row[system]["msgs_per_s"] is not None:
                        row[system]["mb_per_s"] = round(row[system]["msgs_per_s"] * size / 1e6, 2)
                else:
                    row[system] = {"msgs_per_s": None, "error": not_run(system, ctx)}
            for ours, theirs in PEERS.items():
                row[f"ratio_{ours}_{theirs}".replace("-", "_")] = ratio(
                    row[ours]["msgs_per_s"], row[theirs]["msgs_per_s"])
            for raw in RAW:
                row[f"ratio_m2mc_{raw}"] = ratio(row["m2mc"]["msgs_per_s"],
                                                 row[raw]["msgs_per_s"])
                if raw in runs:
                    losses = [t["loss_max"] for t in runs[raw] if "loss_max" in t]
                    row[raw]["loss_max"] = max(losses) if losses else None
            rows.append(row)
    return rows


def latency(args: argparse.Namespace, systems: list[str], rows: list[dict[str, Any]],
            ctx: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for size, tick in itertools.product(args.sizes, args.pace_ticks):
        ctx["pace_tick"] = tick
        row: dict[str, Any] = {"size": size, "seconds": args.latency_seconds,
                               "pace_tick_s": tick}
        paced = [s for s in systems if s not in RAW]
        rates: dict[str, float] = {}
        rate_from: dict[str, str] = {}
        for system in paced:
            sized = [r[system] for r in rows if r["size"] == size]
            best = [e["msgs_per_s"] for e in sized if e["msgs_per_s"]]
            # Without a complete trial, the rate it delivered at in the incomplete ones.
            partial = [statistics.median(e["incomplete_trials_msgs_per_s"]) for e in sized
                       if e.get("incomplete_trials_msgs_per_s")]
            if args.latency_rate:
                rates[system] = args.latency_rate
                rate_from[system] = "--latency-rate"
            elif best or partial:
                rates[system] = round(max(best or partial) / 2, 1)
                rate_from[system] = "complete trials" if best else "incomplete trials"
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in rates}
        names = list(rates)
        for trial in range(args.latency_trials):
            order = names[trial % max(1, len(names)):] + names[:trial % max(1, len(names))]
            for system in order:
                count = max(100, int(rates[system] * args.latency_seconds))
                result = run_trial(system, size, count, rates[system], args.receivers, ctx)
                runs[system].append(result)
                log(f"latency size {size} tick {tick} s trial {trial + 1} {system} at "
                    f"{rates[system]}/s: "
                    f"{result.get('latency_ms', result.get('error'))}")
        for system in (s for s in SYSTEMS if s not in RAW):
            if system not in runs:
                row[system] = {"error": not_run(system, ctx) if system not in systems
                               else "no rate measured"}
                continue
            trials = runs[system]
            good = [t for t in trials if t.get("complete") and "latency_ms" in t]
            entry: dict[str, Any] = {"rate": rates[system],
                                     "rate_half_of_median_of": rate_from[system],
                                     "trials_counted": len(good), "trials": trials}
            for q in ("p50", "p99"):
                values = [t["latency_ms"][q] for t in good]
                entry[f"{q}_ms"] = statistics.median(values) if values else None
                entry[f"{q}_range_ms"] = [min(values), max(values)] if values else None
            row[system] = entry
        out.append(row)
    return out


def not_run(system: str, ctx: dict[str, Any]) -> str:
    if system.startswith("jgroups") and "error" in ctx["jgroups"]:
        return str(ctx["jgroups"]["error"])
    return "not run (--systems)"


def log(text: str) -> None:
    print(f"[peers {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- main
def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n", 2)[2] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    floats = lambda text: [float(x) for x in text.split(",") if x]  # noqa: E731
    parser.add_argument("--sizes", type=ints, default=[100, 65536],
                        help="payload sizes in bytes, comma-separated (100,65536)")
    parser.add_argument("--counts", type=ints, default=[100_000, 400_000],
                        help="messages per trial, comma-separated (100000,400000)")
    parser.add_argument("--trials", type=int, default=3, help="alternating trials (3)")
    parser.add_argument("--receivers", type=int, default=3, help="receiver processes (3)")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help=f"which of {','.join(SYSTEMS)} to run (all)")
    parser.add_argument("--latency-seconds", type=float, default=10.0,
                        help="length of each paced latency run (10)")
    parser.add_argument("--latency-trials", type=int, default=3,
                        help="alternating latency trials (3)")
    parser.add_argument("--latency-rate", type=float, default=0.0,
                        help="pace every system's latency runs at this many msg/s, not "
                        "at half of its own best rate (to compare them at one rate)")
    parser.add_argument("--pace-ticks", type=floats, default=[0.001, 0.0],
                        help="latency runs for each: a paced sender ahead of its schedule "
                        "sleeps at least this many seconds, then sends what came due "
                        "(0.001,0; 0: until the next message is due)")
    parser.add_argument("--no-latency", action="store_true", help="throughput only")
    parser.add_argument("--trial-seconds", type=float, default=300.0,
                        help="a receiver gives up this long after its first delivery: the "
                        "trial then does not count, its partial rate is shown (300)")
    parser.add_argument("--m2mc-packet", type=int, default=M2MP_PACKET,
                        help="M2MP packet size of m2mc and m2mc-total, bytes: the channel "
                        "URL's packet= (508, the default of the wire; up to 65507)")
    parser.add_argument("--jgroups-jar", default="/usr/share/java/jgroups.jar")
    parser.add_argument("--quick", action="store_true",
                        help="100 B, 5000 messages, one trial, 3 s latency runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.counts, args.trials = [100], [5000], 1
        args.latency_seconds, args.latency_trials = 3.0, 1
    if (min(args.sizes) < 12 or max(args.sizes) > 1_000_000 or min(args.counts) < 1
            or args.trials < 1 or args.receivers < 1 or args.latency_rate < 0
            or not args.pace_ticks or not all(0 <= t <= 0.1 for t in args.pace_ticks)
            or not M2MP_PACKET <= args.m2mc_packet <= 65507):
        parser.error("sizes must be 12..1000000 bytes; counts, trials, receivers >= 1; "
                     "--pace-ticks 0..0.1 s each; --m2mc-packet 508..65507")
    return args


def reexec_in_namespace(argv: list[str]) -> int:
    """Run this script again inside a new network namespace with only ``lo`` up."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        print(json.dumps({"error": "unshare or ip (util-linux, iproute2) is missing: no "
                                   "loopback-only network namespace, nothing measured"}))
        return 1
    env = {**os.environ, IN_NAMESPACE: "1"}
    proc = subprocess.run(["unshare", "-rn", "sh", "-c", NETNS_SETUP, "sh", PYTHON,
                           str(Path(__file__).resolve()), *argv], env=env)
    if proc.returncode not in (0, 1):
        print(json.dumps({"error": f"the loopback-only namespace could not be used "
                                   f"(exit {proc.returncode})"}))
    return proc.returncode


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if os.environ.get(IN_NAMESPACE) != "1":
        return reexec_in_namespace(argv)
    interfaces = sorted(name for _, name in socket.if_nameindex())
    if interfaces != ["lo"]:
        print(json.dumps({"error": f"not a loopback-only namespace: {interfaces}"}))
        return 1
    systems = [s for s in SYSTEMS if s in args.systems.split(",")]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="m2mc-peers-") as tmp:
        jgroups = prepare_jgroups(args.jgroups_jar, tmp)
        if "error" in jgroups:
            systems = [s for s in systems if not s.startswith("jgroups")]
        ctx = {"rng": random.Random(), "tmp": tmp, "trial_seconds": args.trial_seconds,
               "jgroups": jgroups, "pace_tick": 0.0, "m2mc_packet": args.m2mc_packet}
        clock = clock_check(jgroups.get("java"))
        if clock.get("checked") and not clock.get("common"):
            log(f"Java and Python clocks differ: {clock}; latency not measured")
        rows = throughput(args, systems, ctx)
        lat = ([] if args.no_latency or (clock.get("checked") and not clock.get("common"))
               else latency(args, systems, rows, ctx))
    out = {"bench": "peers", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "load_average_before": [round(x, 2) for x in load_before],
           "load_average_after": [round(x, 2) for x in os.getloadavg()],
           "cpus": os.cpu_count(), "receivers": args.receivers, "trials": args.trials,
           "pace_ticks_s": args.pace_ticks, "m2mc_packet": args.m2mc_packet,
           "namespace": {"how": "unshare -rn, lo up", "interfaces": interfaces},
           "clock": clock,
           "jgroups": {k: v for k, v in jgroups.items() if k != "java"},
           "throughput": rows, "latency": lat}
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
