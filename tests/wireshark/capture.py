"""Capture a real run on the namespace lab (tests/netns/netns_lab.py), drive its nodes,
and read their traces.

The capture is dumpcap (installed with tshark) on the lab switch's bridge, in the
switch's own namespace: every frame between the lab's hosts, nothing else.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dissection import DUMPCAP
from netns_lab import Host, Lab
from netns_processes import Lines, child_environment, wait_until  # (the namespace tests' own)

HERE = Path(__file__).parent
M2MC = [sys.executable, "-m", "m2mc.cli"]
child_env = child_environment  # environment for m2mc children (the capture tests' name)


class Capture:
    """``with Capture(lab, path):`` captures the lab's IPv4 UDP and TCP into ``path``
    (pcapng); ``stats`` then says how many frames the interface saw and dropped."""

    def __init__(self, lab: Lab, path: Path) -> None:
        assert DUMPCAP is not None
        self.lab, self.path = lab, path
        self.process: subprocess.Popen[bytes] | None = None
        self.err: Lines | None = None
        self.stats: dict[str, int] = {}

    def __enter__(self) -> Capture:
        # IPv4 UDP and TCP only: the kernel's own IGMP, ARP and IPv6 chatter is not ours
        self.process = self.lab.spawn(self.lab.switch, [DUMPCAP, "-i", "br0", "-B", "64",
                                                        "-f", "ip and (udp or tcp)",
                                                        "-w", str(self.path)])
        self.err = Lines(self.process.stderr)
        wait_until(self.err.has("Capturing on"), "dumpcap to start", 30, self.err.snapshot)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> dict[str, int]:
        if self.process is None or self.err is None:
            return self.stats
        if self.process.poll() is None:
            time.sleep(0.5)  # let the last frames reach the file
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=30)
        text = "\n".join(self.err.closed(30))
        got = re.search(r"received/dropped on interface '.*?': (\d+)/(\d+)", text)
        if got:
            self.stats = {"received": int(got.group(1)), "dropped": int(got.group(2))}
        self.process = None
        return self.stats


class Child:
    """A process in a lab namespace, its stdout and stderr collected."""

    def __init__(self, lab: Lab, host: Host, argv: list[str], env: dict[str, str],
                 stdin: int | None = subprocess.DEVNULL) -> None:
        self.process = lab.spawn(host, argv, env=env, stdin=stdin)
        self.out = Lines(self.process.stdout)
        self.err = Lines(self.process.stderr)

    def finish(self, timeout: float = 60) -> int:
        self.process.wait(timeout=timeout)
        self.out.closed(30)
        self.err.closed(30)
        return self.process.returncode

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        self.finish()


class GroupNode(Child):
    """tests/wireshark/group_node.py in a namespace; ``do(command)`` waits for its ``ok``."""

    def __init__(self, lab: Lab, host: Host, pid: str, channel: str, trace: Path,
                 env: dict[str, str], options: Sequence[str] = ()) -> None:
        super().__init__(lab, host, [sys.executable, str(HERE / "group_node.py"), "--pid", pid,
                                     "--channel", channel, "--trace", str(trace), *options],
                         env, stdin=subprocess.PIPE)
        self.pid = pid
        wait_until(self.out.has("ready"), f"{pid} to start", 60, self.err.snapshot)

    def start(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command.encode() + b"\n")
        self.process.stdin.flush()

    def wait(self, command: str, timeout: float = 90) -> None:
        wait_until(lambda: any(line in (f"ok {command}",) or line.startswith(f"error {command}")
                               for line in self.out.snapshot()),
                   f"{self.pid}: {command}", timeout, lambda: self.err.snapshot()[-5:])
        errors = [line for line in self.out.snapshot() if line.startswith(f"error {command}")]
        assert not errors, errors

    def do(self, command: str, timeout: float = 90) -> None:
        self.start(command)
        self.wait(command, timeout)

    def count(self, gid: str, what: str = "count") -> int:
        """How many messages of ``gid`` this node has delivered (``what="skipped"``:
        given up as gone everywhere)."""
        self.do(f"{what} {gid}")
        return int([line for line in self.out.snapshot()
                    if line.startswith(f"{what} {gid} ")][-1].split()[-1])

    def quit(self) -> None:
        if self.process.poll() is None:
            self.start("quit")
            assert self.process.stdin is not None
            self.process.stdin.close()
        assert self.finish() == 0, self.err.snapshot()[-10:]


def cut(lab: Lab, host: Host) -> None:
    """Take the host's port off the switch: nothing it sends or is sent crosses."""
    subprocess.run(["ip", "-n", lab.switch, "link", "set", host.port, "nomaster"], check=True)


def reconnect(lab: Lab, host: Host) -> None:
    subprocess.run(["ip", "-n", lab.switch, "link", "set", host.port, "master", "br0"],
                   check=True)


def trace_rows(trace: Path) -> list[dict[str, Any]]:
    """Every row of every node's JSONL trace under ``trace``."""
    rows = []
    for path in sorted(trace.glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line]
    return rows


def detail(row: dict[str, Any]) -> dict[str, Any]:
    return json.loads(row.get("detail") or "{}")
