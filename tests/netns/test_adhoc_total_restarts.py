"""Ad hoc total order with durable logs across four namespaces: kill -9 of one member,
of two at once (the majority lost), of all four at once (a power cut), then a rolling
restart, under 15% loss, while every member sends; judged by the members' own
records and by the pipeline.

Four ``total_node.py`` processes (namespaces h0..h3), each a `Node` with its own
``data_dir``, join the group ``netns-total`` by name in total order and send a message
every 0.1 s until the test creates the stop file. Each fault is SIGKILL (nothing the
process has not written survives), and each killed member is started again at once
with the same command line: it takes the group up from its log and sends on, its
seqnos following the ones its log holds. The test goes on to the next fault only once
every member has delivered a message the restarted ones sent after their restart, so
nothing depends on how long anything takes.

What a restarted member promises (docs/group.md section 8, "What a member killed with
kill -9 promises"): the group layer delivers every message exactly once in all of the
member's lifetimes together, in the group's one order (its trace's ``deliver`` rows
and ``history()`` say so); the application is handed each message at most once, and
the messages delivered but still unread when the process was killed are in
``history()``, not handed again."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from netns_lab import Lab
from netns_processes import Child, Lines, stop_nodes, wait_all, wait_until
from test_infra import analyze

pytestmark = [pytest.mark.netns, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("nft") is None,
                                 reason="nftables is not installed (apt-get install nftables)")]

NODE = str(Path(__file__).with_name("total_node.py"))
GROUP, PORT = "239.255.90.23", 47023
PIDS = ["a", "b", "c", "d"]  # "a", the lowest, founds the group's log: the first sequencer
LOSS = 15
RUN = "netns-adhoc-total-restarts"


def trace_rows(trace: Path, pid: str) -> list[dict[str, object]]:
    """The member's trace, every lifetime's file in order (``a.jsonl``, ``a.1.jsonl``, ...)."""
    files = [trace / f"{pid}.jsonl"]
    files += sorted(trace.glob(f"{pid}.*.jsonl"), key=lambda f: int(f.name.split(".")[1]))
    return [json.loads(line) for f in files if f.exists()
            for line in f.read_text().splitlines()]


def sent_mids(trace: Path) -> set[str]:
    """Every message a member's log holds as sent (the journaled trace: docs/group.md §10)."""
    return {str(row["mid"]) for pid in PIDS for row in trace_rows(trace, pid)
            if row["event"] == "send"}


def delivered(trace: Path, pid: str) -> list[tuple[int, str]]:
    return [(int(str(row["gseq"])), str(row["mid"])) for row in trace_rows(trace, pid)
            if row["event"] == "deliver"]


def app_reads(out: Lines) -> list[tuple[int, str, str]]:
    """What one lifetime's application read: ``D <gseq> <mid> <payload>`` lines."""
    reads = []
    for line in out.snapshot():
        if line.startswith("D "):
            _, gseq, mid, payload = line.split(" ", 3)
            reads.append((int(gseq), mid, payload))
    return reads


@pytest.mark.timeout(600)  # the run, then a Spark analysis on a shared 2-core machine
def test_kill_9_of_one_two_all_and_a_rolling_restart_keep_one_total_order(
        lab: Lab, child_env: dict[str, str], tmp_path: Path) -> None:
    trace, data = tmp_path / "trace", tmp_path / "data"
    trace.mkdir()
    data.mkdir()
    (trace / "run.json").write_text(json.dumps({"run": RUN, "loss": LOSS, "nodes": len(PIDS),
                                                "orders": ["total"]}))
    stop = tmp_path / "stop"
    lives: dict[str, list[Child]] = {pid: [] for pid in PIDS}

    def start(pid: str) -> None:
        host = lab.hosts[PIDS.index(pid)]
        url = f"udp-multicast://{GROUP}:{PORT}?iface={host.address}&ttl=1"
        process = lab.spawn(host, [sys.executable, NODE, "--pid", pid, "--channel", url,
                                   "--data", str(data / pid), "--trace", str(trace),
                                   "--run", RUN, "--peers", ",".join(PIDS),
                                   "--stop", str(stop), "--life", str(len(lives[pid]))],
                            env=child_env)
        lives[pid].append((process, Lines(process.stdout), Lines(process.stderr)))

    def kill_and_restart(*pids: str) -> None:
        """SIGKILL these members at once, then start each again on its data_dir."""
        for pid in pids:
            lives[pid][-1][0].kill()
        for pid in pids:
            lives[pid][-1][0].wait(timeout=10)
        for pid in pids:
            start(pid)

    def progress() -> dict[str, Lines]:
        return {pid: lives[pid][-1][2] for pid in PIDS}

    def everyone_read_from(*pids: str) -> Callable[[], bool]:
        """Every member's current process has read a message that each of ``pids`` sent
        in its current lifetime: they are back, and the group orders with them."""
        tags = {f"{pid} life {len(lives[pid]) - 1}" for pid in pids}
        return lambda: all(tags <= {payload for _, _, payload in app_reads(lives[p][-1][1])}
                           for p in PIDS)

    def resumed(what: str, *pids: str) -> None:
        wait_until(everyone_read_from(*pids), what, 120,
                   lambda: {p: lives[p][-1][2].snapshot()[-2:] for p in PIDS})

    for pid in PIDS:
        start(pid)
    try:
        wait_all(progress(), lambda pid: f"{pid} sees all members", "every member to join", 60)
        lab.set_loss(LOSS)
        resumed("the first messages everywhere", *PIDS)
        kill_and_restart("a")  # one member, the sequencer
        resumed("a to be back after its kill -9", "a")
        kill_and_restart("b", "c")  # two of four: the majority is lost
        resumed("b and c to be back after their kill -9", "b", "c")
        kill_and_restart(*PIDS)  # a power cut
        resumed("every member to be back after the power cut", *PIDS)
        for pid in PIDS:  # a rolling restart: each back before the next goes
            kill_and_restart(pid)
            resumed(f"{pid} to be back in the rolling restart", pid)
        stop.touch()
        wait_all(progress(), lambda pid: f"{pid} stopped sending", "every member to stop", 60)
        sent = sent_mids(trace)
        wait_until(lambda: all({m for _, m in delivered(trace, p)} >= sent for p in PIDS),
                   "every member to deliver every message", 120,
                   lambda: {p: len(sent - {m for _, m in delivered(trace, p)}) for p in PIDS})
    finally:
        results = stop_nodes({pid: chain[-1] for pid, chain in lives.items()})
    # Kills: a alone, b and c, all four, then each in turn.
    assert {pid: len(chain) for pid, chain in lives.items()} == {"a": 4, "b": 4, "c": 4, "d": 3}
    order = [(gseq, mid) for gseq, mid in delivered(trace, PIDS[0])]
    # The group layer: every message once, numbered 1, 2, 3, ... in one order everywhere.
    assert [gseq for gseq, _ in order] == list(range(1, len(sent) + 1))
    assert {mid for _, mid in order} == sent
    payloads: dict[str, str] = {}
    for pid in PIDS:
        assert delivered(trace, pid) == order, pid
        status, result = results[pid]
        assert status == 0 and result is not None, (pid, status)
        # The durable log (history() lists in the log's order, not the group's).
        assert sorted((g, m) for g, m, _ in result["history"]) == order, pid
        for _, mid, payload in result["history"]:
            assert payloads.setdefault(mid, payload) == payload, mid  # the same message
    # The application: each message at most once, in the group's order; what a
    # lifetime did not read before its kill is in history(), not handed again.
    position = {mid: gseq for gseq, mid in order}
    unread: dict[str, int] = {}
    for pid in PIDS:
        read = [r for _, out, _ in lives[pid] for r in app_reads(out)]
        assert all(position[mid] == gseq and payloads[mid] == payload
                   for gseq, mid, payload in read), pid
        gseqs = [gseq for gseq, _, _ in read]
        assert gseqs == sorted(set(gseqs)), pid  # never twice, never out of order
        for _, out, _ in lives[pid]:  # within a lifetime, nothing skipped
            mine = [gseq for gseq, _, _ in app_reads(out)]
            assert mine == list(range(mine[0], mine[0] + len(mine))) if mine else True, pid
        assert gseqs[0] == 1 and gseqs[-1] == len(order), pid
        unread[pid] = len(order) - len(read)
    print(f"{len(order)} messages; unread by a killed process (in history()): {unread}")
    analyze(trace, tmp_path / "analysis", child_env, len(sent), len(PIDS))
