"""docs/deployment.md, run as written on machines made of network namespaces.

The page marks the commands a lab can run: ``<!-- lab: hN [background] [retry] -->``
before a ```sh block runs that block, unchanged, with ``sh -e`` in machine N's
namespace (lab host N-1) and a working directory of its own. ``background`` starts it
and goes on; ``retry`` runs it again until it exits 0 (a command that asks a
deployment still electing its master). The ad hoc section runs on laptops whose
interface is called ``wlan0``; the infrastructure section on hosts whose interface is
``eth0``, with the member's laptop (machine 4) on ``wlan0``. A key file made on one
machine is copied to the others, as the page tells the reader to do.

What the page promises is then checked: the listener got the message sent, the two
scripted chat participants end with the same tree, the hosts elect one master, and the
Wi-Fi member's message is delivered.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from netns_lab import ROOT, Lab

pytestmark = [pytest.mark.netns, pytest.mark.slow]

PAGE = ROOT / "docs" / "deployment.md"
_BLOCK = re.compile(r"<!-- lab: h(\d)((?: [a-z]+)*) -->\n```sh\n(.*?)```", re.S)
WAIT = 120.0


@dataclass(frozen=True)
class Block:
    machine: int  # 1-based, as the page numbers them
    script: str
    background: bool
    retry: bool


def blocks(section: str) -> list[Block]:
    text = PAGE.read_text()
    start = text.index(f"\n## {section}")
    end = text.find("\n## ", start + 1)
    found = []
    for match in _BLOCK.finditer(text[start:end if end > 0 else len(text)]):
        flags = match.group(2).split()
        assert set(flags) <= {"background", "retry"}, flags
        found.append(Block(int(match.group(1)), match.group(3), "background" in flags,
                           "retry" in flags))
    return found


def rename(lab: Lab, machine: int, name: str) -> None:
    netns = lab.hosts[machine - 1].netns
    for argv in (["link", "set", "eth0", "down"], ["link", "set", "eth0", "name", name],
                 ["link", "set", name, "up"]):
        subprocess.run(["ip", "-n", netns, *argv], check=True, capture_output=True)


class Machines:
    """Runs the page's blocks; each machine has a working directory under ``root``."""

    def __init__(self, lab: Lab, root: Path, env: dict[str, str]) -> None:
        self.lab = lab
        self.root = root
        self.env = dict(env)
        self.env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
        self.background: list[tuple[Block, subprocess.Popen[bytes]]] = []

    def cwd(self, machine: int) -> Path:
        path = self.root / f"machine{machine}"
        path.mkdir(exist_ok=True)
        return path

    def run(self, block: Block) -> subprocess.CompletedProcess[bytes] | None:
        host = self.lab.hosts[block.machine - 1]
        argv = ["sh", "-ec", block.script]
        if block.background:
            process = self.lab.spawn(host, argv, env=self.env, cwd=self.cwd(block.machine))
            self.background.append((block, process))
            return None
        deadline = time.monotonic() + WAIT
        while True:
            done = subprocess.run(["ip", "netns", "exec", host.netns, *argv], env=self.env,
                                  cwd=self.cwd(block.machine), capture_output=True,
                                  timeout=WAIT, check=False)
            if done.returncode == 0 or not block.retry or time.monotonic() > deadline:
                break
            time.sleep(0.5)  # a poll: the deployment is still electing its master
        assert done.returncode == 0, (block.script, done.stdout, done.stderr)
        self.share_keys(block.machine)
        return done

    def share_keys(self, machine: int) -> None:
        """The page says: copy the key to every machine (by a safe channel)."""
        for key in self.cwd(machine).glob("*.key"):
            for other in range(1, len(self.lab.hosts) + 1):
                target = self.cwd(other) / key.name
                if other != machine and not target.exists():
                    shutil.copy2(key, target)

    def finish(self, block: Block) -> bytes:
        process = next(p for b, p in self.background if b is block)
        out, err = process.communicate(timeout=WAIT)
        assert process.returncode == 0, (block.script, out, err)
        return out

    def stop(self) -> None:
        for _, process in self.background:
            if process.poll() is None:
                process.terminate()


def test_the_ad_hoc_section_runs_as_written(lab: Lab, child_env: dict[str, str],
                                            tmp_path: Path) -> None:
    for machine in (1, 2, 3):
        rename(lab, machine, "wlan0")
    machines = Machines(lab, tmp_path, child_env)
    listen, send, key, ana, ben = blocks("Ad hoc")
    try:
        machines.run(listen)
        _until_listening(lab, listen.machine)
        machines.run(send)
        [line] = machines.finish(listen).decode().splitlines()
        assert json.loads(line)["len"] == len(b"hello from laptop 1\n")
        machines.run(key)
        assert (machines.cwd(1) / "team.key").stat().st_mode & 0o777 == 0o600
        machines.run(ana)
        machines.run(ben)
        machines.finish(ana)
        trees = [json.loads((machines.cwd(m) / f"{who}.json").read_text())["tree"]
                 for m, who in ((1, "ana"), (3, "ben"))]
        assert trees[0] == trees[1]
        texts = [trees[0][0]["text"], trees[0][0]["children"][0]["text"]]
        assert texts == ["Pizza or curry?", "Curry!"]
    finally:
        machines.stop()


def test_the_infrastructure_section_runs_as_written(lab: Lab, child_env: dict[str, str],
                                                    tmp_path: Path) -> None:
    rename(lab, 4, "wlan0")
    machines = Machines(lab, tmp_path, child_env)
    key, h1, h2, h3, show, dana = blocks("Infrastructure")
    try:
        machines.run(key)
        for host in (h1, h2, h3):
            machines.run(host)
        deadline = time.monotonic() + WAIT
        while True:  # polled: the hosts may still be electing their master
            done = machines.run(show)
            assert done is not None
            view = json.loads(done.stdout)
            if view.get("master") or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert view["master"] in {"H1", "H2", "H3"}, view
        machines.run(dana)
        tree = json.loads((machines.cwd(4) / "dana.json").read_text())["tree"]
        assert [node["text"] for node in tree] == ["Hello from the Wi-Fi"]
    finally:
        machines.stop()


def _until_listening(lab: Lab, machine: int) -> None:
    """The listener has joined its group on wlan0 (polled: a process start is slow)."""
    netns = lab.hosts[machine - 1].netns
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        out = subprocess.run(["ip", "-n", netns, "maddr", "show", "dev", "wlan0"],
                             capture_output=True, text=True, check=False).stdout
        if "239.255.77.77" in out:
            return
        time.sleep(0.1)
    raise AssertionError("the listener never joined 239.255.77.77 on wlan0")
