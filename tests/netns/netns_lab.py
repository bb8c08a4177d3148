"""A throw-away network of namespaces: hosts on a bridge, faults by nftables.

Layout (every name unique per lab, every piece inside namespaces the lab creates;
the host's own namespace is never touched)::

    <lab>-sw   a switch namespace holding bridge br0 (multicast snooping off, so
               every multicast frame reaches every port, as on a radio medium)
    <lab>-h0 .. <lab>-h{n-1}
               one host each, interface eth0 = one end of a veth pair whose other
               end (p0 .. p{n-1}) is a port of br0

Faults are nftables rules in the switch's ``bridge`` family forward hook, so they
apply per egress port: ``set_loss`` drops a random share of the frames towards
chosen hosts, ``partition`` drops frames between hosts on different sides,
``heal`` removes every fault. The kernel here has no netem; nftables is enough.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Host addresses are ordinary test addresses (10.77.0.0/24) that exist ONLY inside the
# namespaces a lab creates, on a bridge with no route out: nothing is ever sent to them
# from, or routed to them in, the real network (test_lab.py checks there is no way out).
LAB_NETWORK = "10.77.0"
_NAME = re.compile(r"^m2mclab(\d+)x[0-9a-f]{4}-(sw|h\d+)$")
ROOT = Path(__file__).resolve().parents[2]


class LabUnavailable(Exception):
    """Namespaces cannot be made here (not root, no ``ip``, a restricted container)."""


def host_address(index: int) -> str:
    return f"{LAB_NETWORK}.{index + 1}"


@dataclass
class Host:
    index: int
    netns: str
    address: str
    port: str  # its port on the switch


@dataclass
class Lab:
    size: int = 4
    name: str = field(default_factory=lambda: f"m2mclab{os.getpid()}x{secrets.token_hex(2)}")
    hosts: list[Host] = field(default_factory=list)
    _created: list[str] = field(default_factory=list)
    # Every datagram its own frame on the bridge: a host's eth0 cuts a UDP GSO buffer
    # (m2mc.transport.offload, up to 64 packets in one) before the switch, as a radio
    # puts each packet on the air. Without it such a run crosses the bridge as one
    # frame: counted once, and lost or kept whole by ``set_loss``.
    one_frame_per_datagram: bool = False
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _faults: bool = False

    @property
    def switch(self) -> str:
        return f"{self.name}-sw"

    # ----------------------------------------------------------- life cycle
    def create(self) -> Lab:
        if sys.platform != "linux":
            raise LabUnavailable("network namespaces need Linux")
        if os.geteuid() != 0:
            raise LabUnavailable("creating network namespaces needs root (CAP_SYS_ADMIN)")
        if shutil.which("ip") is None:
            raise LabUnavailable("the 'ip' command (iproute2) is not installed")
        remove_stale_labs()
        try:
            self._netns_add(self.switch)
        except subprocess.CalledProcessError as exc:
            raise LabUnavailable(f"'ip netns add' failed: {exc.stderr.strip()}") from None
        sw = self.switch
        _ip("-n", sw, "link", "set", "lo", "up")
        _ip("-n", sw, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
        _ip("-n", sw, "link", "set", "br0", "up")
        for index in range(self.size):
            host = Host(index, f"{self.name}-h{index}", host_address(index), f"p{index}")
            self._netns_add(host.netns)
            _ip("-n", host.netns, "link", "set", "lo", "up")
            _ip("-n", host.netns, "link", "add", "eth0", "type", "veth", "peer", "name",
                host.port, "netns", sw)
            _ip("-n", sw, "link", "set", host.port, "master", "br0")
            _ip("-n", sw, "link", "set", host.port, "up")
            _ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0")
            if self.one_frame_per_datagram:
                _ip("-n", host.netns, "link", "set", "eth0", "gso_max_segs", "1")
            _ip("-n", host.netns, "link", "set", "eth0", "up")
            self.hosts.append(host)
        snooping = self.exec(sw, ["cat", "/sys/class/net/br0/bridge/multicast_snooping"])
        assert snooping.stdout.strip() == b"0", "multicast snooping must be off"
        return self

    def add_lan(self, ifname: str, network: str) -> list[str]:
        """A second network beside eth0's: bridge ``br-<ifname>`` in the switch (snooping
        off, as br0), and in each host an interface ``ifname`` on it with address
        ``<network>.<index + 1>/24`` (``network`` as LAB_NETWORK: three octets of a test
        range). Returns the hosts' addresses on it, in host order. Faults (loss,
        partitions) apply to eth0's ports only."""
        sw, bridge = self.switch, f"br-{ifname}"
        _ip("-n", sw, "link", "add", bridge, "type", "bridge", "mcast_snooping", "0")
        _ip("-n", sw, "link", "set", bridge, "up")
        addresses = []
        for host in self.hosts:
            port = f"{ifname[:4]}{host.index}"
            address = f"{network}.{host.index + 1}"
            _ip("-n", host.netns, "link", "add", ifname, "type", "veth", "peer", "name", port,
                "netns", sw)
            _ip("-n", sw, "link", "set", port, "master", bridge)
            _ip("-n", sw, "link", "set", port, "up")
            _ip("-n", host.netns, "addr", "add", f"{address}/24", "dev", ifname)
            _ip("-n", host.netns, "link", "set", ifname, "up")
            addresses.append(address)
        return addresses

    def destroy(self) -> None:
        for process in self._processes:
            if process.poll() is None:
                process.terminate()
        for process in self._processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        # Whatever the spawned processes started in turn (a shell's background job, a
        # command a page's block runs) is still in the namespace: a deleted namespace
        # lives on while a process is in it, so every one of them is killed first.
        for netns in self._created:
            kill_everything_in(netns)
        for netns in reversed(self._created):
            subprocess.run(["ip", "netns", "del", netns], capture_output=True, check=False)
        self._created.clear()

    def _netns_add(self, netns: str) -> None:
        subprocess.run(["ip", "netns", "add", netns], capture_output=True, text=True,
                       check=True)
        self._created.append(netns)

    # ----------------------------------------------------------- processes
    def spawn(self, host: Host | str, argv: Sequence[str], *, env: dict[str, str] | None = None,
              stdin: int | None = subprocess.DEVNULL, cwd: Path | None = None,
              stdout: int = subprocess.PIPE,
              stderr: int = subprocess.PIPE) -> subprocess.Popen[bytes]:
        """Start ``argv`` inside the host's namespace; killed when the lab is destroyed.

        ``ip netns exec`` execs the command, so the Popen pid is the command's pid.
        """
        netns = host.netns if isinstance(host, Host) else host
        process = subprocess.Popen(["ip", "netns", "exec", netns, *argv], stdin=stdin,
                                   stdout=stdout, stderr=stderr, env=env, cwd=cwd)
        self._processes.append(process)
        return process

    def exec(self, host: Host | str, argv: Sequence[str], *, input: bytes | None = None,
             env: dict[str, str] | None = None,
             timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
        netns = host.netns if isinstance(host, Host) else host
        return subprocess.run(["ip", "netns", "exec", netns, *argv], input=input, env=env,
                              capture_output=True, timeout=timeout, check=False)

    def counter(self, host: Host, name: str) -> int:
        """An interface statistic of the host's eth0 (e.g. ``rx_packets``)."""
        out = self.exec(host, ["cat", f"/sys/class/net/eth0/statistics/{name}"])
        return int(out.stdout)

    # ----------------------------------------------------------- faults
    def set_loss(self, percent: int, towards: Sequence[Host] | None = None) -> None:
        """Drop ``percent``% of UDP frames the switch forwards towards these hosts (all)."""
        ports = _set_of(h.port for h in (towards or self.hosts))
        self._rule(f"oifname {ports} meta l4proto udp numgen random mod 100 < {percent} drop")

    def partition(self, *sides: Sequence[Host]) -> None:
        """No frame crosses between hosts of different sides, in either direction."""
        for i, side in enumerate(sides):
            others = [h for j, other in enumerate(sides) if j != i for h in other]
            if side and others:
                self._rule(f"iifname {_set_of(h.port for h in side)} "
                           f"oifname {_set_of(h.port for h in others)} drop")

    def heal(self) -> None:
        if self._faults:
            self._nft("flush chain bridge m2mc forward")

    # ----------------------------------------------------------- what is on the air
    def count_udp(self) -> None:
        """Count every UDP frame on the bridge, in a table of its own (``heal`` leaves it):
        ``sent`` as a host's port hands it to the bridge (before any loss), ``delivered``
        as the bridge hands it to a port (after the faults, once per receiving host)."""
        self._nft("add table bridge m2mcair")
        for counter, hook in (("sent", "prerouting"), ("delivered", "postrouting")):
            self._nft(f"add counter bridge m2mcair {counter}")
            self._nft(f"add chain bridge m2mcair {hook} "
                      f"{{ type filter hook {hook} priority 0; policy accept; }}")
            self._nft(f'add rule bridge m2mcair {hook} meta l4proto udp counter name "{counter}"')

    def udp_counters(self) -> dict[str, tuple[int, int]]:
        """``{"sent": (frames, bytes), "delivered": (frames, bytes)}`` since ``count_udp``
        (bytes as nftables counts them on a bridge: the IP packets, without Ethernet)."""
        out = self.exec(self.switch, ["nft", "-j", "list", "counters", "table", "bridge",
                                      "m2mcair"])
        if out.returncode:
            raise RuntimeError(f"nft list counters: {out.stderr.decode().strip()}")
        counters = {}
        for item in json.loads(out.stdout)["nftables"]:
            if "counter" in item:
                c = item["counter"]
                counters[c["name"]] = (int(c["packets"]), int(c["bytes"]))
        return counters

    def _rule(self, rule: str) -> None:
        if not self._faults:
            self._nft("add table bridge m2mc")
            self._nft("add chain bridge m2mc forward "
                      "{ type filter hook forward priority 0; policy accept; }")
            self._faults = True
        self._nft(f"add rule bridge m2mc forward {rule}")

    def _nft(self, command: str) -> None:
        if shutil.which("nft") is None:
            raise LabUnavailable("nftables is not installed (apt-get install nftables)")
        out = self.exec(self.switch, ["nft", command])
        if out.returncode:
            raise RuntimeError(f"nft {command}: {out.stderr.decode().strip()}")


def _set_of(names: Iterable[str]) -> str:
    items = sorted(f'"{n}"' for n in names)
    return "{ " + ", ".join(items) + " }"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], capture_output=True, text=True, check=True)


def kill_everything_in(netns: str) -> None:
    """SIGKILL every process inside ``netns`` (``ip netns pids``) and wait until none is."""
    deadline = time.monotonic() + 10
    while True:
        listing = subprocess.run(["ip", "netns", "pids", netns], capture_output=True,
                                 text=True, check=False).stdout.split()
        if not listing:
            return
        for pid in listing:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        if time.monotonic() > deadline:
            raise AssertionError(f"processes in {netns} survive SIGKILL: {listing}")
        time.sleep(0.05)  # a poll: the kernel reaps them


def remove_stale_labs() -> None:
    """Delete namespaces left by labs whose test process died without cleaning up."""
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                             check=False).stdout
    for line in listing.splitlines():
        name = line.split()[0] if line.split() else ""
        match = _NAME.match(name)
        if match and not Path(f"/proc/{match.group(1)}").exists():
            kill_everything_in(name)
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def rss_bytes(pid: int, field: str = "VmRSS") -> int:
    """Resident set size of a process (0 once it is gone); ``field="VmHWM"``: its peak."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    match = re.search(rf"^{field}:\s+(\d+) kB", status, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else 0
