"""A durable infrastructure deployment in a lab, for the namespace tests that kill and
restart its hosts (test_infra_power.py, test_infra_overlapping_restarts.py): three
``m2mc host --data-dir`` processes in namespaces h0..h2, each the gateway of its own
cell, members on the public API (infra_node.py), and what the tests read of them."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netns_lab import Host, Lab
from netns_processes import M2MC, Child, Lines, wait_all, wait_until
from test_infra import cell_url

NODE = str(Path(__file__).with_name("infra_node.py"))


@dataclass
class Deployment:
    """The hosts H0..H2 (namespaces h0..h2) and the members of one test run."""

    lab: Lab
    key: Path
    tmp: Path  # holds trace/ (members), hosts/ (host traces), data/ and the go file
    env: dict[str, str]
    run: str
    host_flags: tuple[str, ...] = ()  # further ``m2mc host`` options (--subscribe)
    member_flags: tuple[str, ...] = ()  # further infra_node.py options (--pad)
    hosts: dict[str, Child] = field(default_factory=dict)
    members: dict[str, Child] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for d in (self.trace, self.host_trace, self.data):
            d.mkdir(exist_ok=True)

    @property
    def trace(self) -> Path:
        return self.tmp / "trace"

    @property
    def host_trace(self) -> Path:
        return self.tmp / "hosts"

    @property
    def data(self) -> Path:
        return self.tmp / "data"

    @property
    def go(self) -> Path:
        return self.tmp / "go"

    @property
    def burst(self) -> Path:
        """While this file exists, the members send every 0.01 s (infra_node.py)."""
        return self.tmp / "burst"

    def namespace(self, name: str) -> Host:
        """The namespace of host ``name`` (H0 is h0, ...)."""
        return self.lab.hosts[int(name[1:])]

    def start_host(self, i: int) -> None:
        """Start H``i`` (again: the same command line, the same data dir) and wait until
        it says it is up."""
        hosts = self.lab.hosts[:3]
        host = hosts[i]
        peers = [f"{h.address}:47201" for h in hosts if h is not host]
        argv = [*M2MC, "host", "--id", f"H{i}", "--listen", f"{host.address}:47201",
                "--peer", ",".join(peers), "--cell", cell_url(i, host.address),
                "--uplink", f"{host.address}:47301", "--key-file", str(self.key),
                "--data-dir", str(self.data / f"H{i}"), "--trace-dir", str(self.host_trace),
                "--run-id", self.run, *self.host_flags]
        process = self.lab.spawn(host, argv, env=self.env)
        self.hosts[f"H{i}"] = (process, Lines(process.stdout), Lines(process.stderr))
        err = self.hosts[f"H{i}"][2]
        wait_until(err.has(f"H{i} up"), f"host H{i} to start", 30, err.snapshot)

    def kill_host(self, name: str) -> None:
        """SIGKILL: nothing the host has not written survives."""
        process = self.hosts[name][0]
        process.kill()
        process.wait(timeout=10)

    def start_member(self, pid: str, ns: int, cell: int, peers: list[str], send: int,
                     *extra: str) -> None:
        """Member ``pid`` in namespace ``ns``, starting in cell ``cell``, its state in
        data/<pid> (``extra``: ``--already-sent K`` for a power-on)."""
        me = self.lab.hosts[ns]
        cells = ",".join(cell_url(i, me.address) for i in range(3))
        process = self.lab.spawn(me, [sys.executable, NODE, "--pid", pid, "--cells", cells,
                                      "--cell", str(cell), "--key-file", str(self.key),
                                      "--trace", str(self.trace), "--peers", ",".join(peers),
                                      "--send", str(send), "--run", self.run,
                                      "--go", str(self.go), "--data-dir", str(self.data / pid),
                                      "--burst", str(self.burst), *self.member_flags,
                                      *extra], env=self.env)
        self.members[pid] = (process, Lines(process.stdout), Lines(process.stderr))

    def write_run(self, loss: int) -> None:
        """The trace's run.json (what ``m2mc analyze`` reports the run as)."""
        (self.trace / "run.json").write_text(json.dumps({
            "run": self.run, "loss": loss, "hosts": 3, "members": len(self.members)}))

    def go_under_loss(self, loss: int) -> None:
        """Once every member joined: ``loss`` percent lost towards every namespace, the
        members told to send, and each has sent its first 20 messages."""
        progress = self.progress()
        wait_all(progress, lambda pid: f"{pid} joined", "every member to join", 60)
        self.lab.set_loss(loss)
        self.go.touch()
        wait_all(progress, lambda pid: f"{pid} sent 20", "the first messages", 60)

    def finish(self, send: int) -> None:
        """Every member (its latest process) sent its ``send`` messages and delivered
        every message of every member."""
        progress = self.progress()
        wait_all(progress, lambda pid: f"{pid} sent {send}", "the last messages", 180)
        wait_all(progress, lambda pid: f"{pid} done", "every member to deliver everything",
                 180)

    def progress(self) -> dict[str, Lines]:
        """Each member's stderr (joined, sent k, done), its latest process's."""
        return {pid: err for pid, (_, _, err) in self.members.items()}

    def view(self, name: str) -> dict[str, Any]:
        """``m2mc host show`` of one host, run in its own namespace ({} if no answer)."""
        host = self.namespace(name)
        done = self.lab.exec(host, [*M2MC, "host", "show", "--via", f"{host.address}:47201",
                                    "--key-file", str(self.key), "--timeout", "3"],
                             env=self.env, timeout=30)
        try:
            return dict(json.loads(done.stdout)) if done.returncode == 0 else {}
        except ValueError:
            return {}

    def metrics(self, name: str) -> dict[str, float]:
        """Host ``name``'s metrics (``host_flags`` holds ``--metrics 127.0.0.1:9464``),
        read in its namespace; {} if it does not answer (it is down)."""
        done = self.lab.exec(self.namespace(name), ["curl", "-s", "--max-time", "2",
                                                    "http://127.0.0.1:9464/metrics"],
                             timeout=10)
        out = {}
        for line in done.stdout.decode(errors="replace").splitlines():
            if line.startswith("m2mc_host_") and " " in line:
                metric, value = line.rsplit(" ", 1)
                out[metric.split("{", 1)[0]] = float(value)
        return out

    def deliveries(self) -> dict[str, int]:
        """How many deliveries each member's trace shows so far (every incarnation)."""
        counts = dict.fromkeys(self.members, 0)
        for path in self.trace.glob("*.jsonl"):
            for line in path.read_text().splitlines():
                if '"deliver"' in line:
                    row = json.loads(line)
                    if row["event"] == "deliver" and row["node"] in counts:
                        counts[row["node"]] += 1
        return counts

    def host_events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for f in self.host_trace.glob("*.jsonl")
                for line in f.read_text().splitlines()]


def back(seen: dict[str, Any], was: int) -> bool:
    """A restarted host is back: it names a master and that master's commit point has
    reached ``was``, the one it had when it went down (a restarted host's commit point is
    0 until a master syncs it; ``>=``: once the members are done, nothing commits more)."""
    return bool(seen.get("master")) and int(seen.get("commit", 0)) >= max(was, 1)


def check_deliveries(results: dict[str, tuple[int | None, Any]], total: int) -> None:
    """What a user sees: every member delivered every one of the ``total`` messages
    exactly once, in gseq order, and all in one total order."""
    orders = set()
    for pid, (status, result) in results.items():
        assert status == 0 and result is not None, (pid, status, result and result["state"])
        order = result["order"]
        assert len(order) == len(set(order)) == total, (pid, len(order), len(set(order)))
        assert result["delivered"] == total, (pid, result["state"])
        assert result["gseqs"] == sorted(result["gseqs"]), pid  # delivered in gseq order
        orders.add(tuple(order))
    assert len(orders) == 1  # one total order, the same at every member


def check_hosts(d: Deployment, restored: int) -> None:
    """The hosts took their logs up from their data dirs at least ``restored`` times,
    and each stopped cleanly at the end, having refused no frame for its key."""
    phases = [json.loads(r["detail"]).get("phase") for r in d.host_events()
              if r["event"] == "elect"]
    assert phases.count("restored") >= restored, phases
    for name, (_, _, err) in d.hosts.items():
        last = err.closed()[-1]
        assert f"{name} stopped" in last and '"auth_rejected"' not in last, last
