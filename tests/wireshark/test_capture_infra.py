"""Infrastructure mode in a real run: three ``m2mc host`` processes (one namespace each,
a cell each, a TCP backbone between them) and four members in the fourth namespace,
one or two per cell; captured on the switch and decoded by tshark with the dissector.
Once unkeyed (frames with a CRC-32), once with an HMAC-SHA256 deployment key (every
frame sealed: authentication header shown, bodies decoded).

Every frame is decoded without fault, uplink frames (member to gateway), cell
frames (gateway to members) and backbone frames (TCP, host to host) each on their
link; and what the dissector shows matches the traces: the NEW items on the uplinks
are the messages the members' traces say they sent, the records broadcast in the
cells are what the members delivered (message and global sequence number) and the
JOINED records their joins; the coordinator's log replicated on the backbone holds
them; every Takeover on the backbone is an election a host's trace says it won, the
final master's among them. Keyed: each frame is sealed by the host or member it comes
from.

Then, the members stopped, an operator in the fourth namespace asks a host that is not
the master for its view (``m2mc host show``) and to retire the third host (``m2mc host
retire``): the requests (AdminRequest) come from the operator's connection, the host
passes the change to the master (Reconfig), the master's answer comes back (AdminResult)
and reaches the operator with the text and log position the command printed; the
RETIRED record naming the host is at that position in the log replicated on the
backbone (never in a cell), as the master's trace says. The retired host stops; started
again, the master tells it so (RetiredNotice, with that position) and it stops again.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from capture import HERE, M2MC, Capture, Child, child_env, detail, trace_rows, wait_until
from dissection import Packet, dissect, needs_dumpcap, needs_tshark, undecoded_frames
from netns_lab import Lab

from m2mc.infra import codec as infra_codec
from m2mc.infra import messages as im
from m2mc.infra import wire as infra_wire

pytestmark = [pytest.mark.netns, pytest.mark.slow, needs_tshark, needs_dumpcap]

BACKBONE_PORT, UPLINK_PORT = 47231, 47331
MEMBERS = {"m0": 0, "m1": 1, "m2": 2, "m3": 0}  # pid -> cell; all in the fourth namespace
SEND = 5


def cell_url(index: int, iface: str) -> str:
    return f"udp-multicast://239.255.93.{10 + index}:{47641 + index}?iface={iface}&ttl=1"


def elections(rows: list[dict[str, Any]], phase: str) -> list[tuple[str, str]]:
    return [(r["node"], detail(r)["epoch"]) for r in rows
            if r["event"] == "elect" and detail(r).get("phase") == phase]


def retire_a_host(lab: Lab, env: dict[str, str], hosts: list[Child],
                  start_host: Callable[[int], Child], keyed: list[str]) -> dict[str, Any]:
    """``m2mc host show``, then ``m2mc host retire`` of a host that is neither the master
    nor the one asked; the retired host stops, and stops again when started again. What
    the commands printed, for the checks."""
    operator = lab.hosts[3]

    def admin(*args: str) -> subprocess.CompletedProcess[bytes]:
        return lab.exec(operator, [*M2MC, "host", *args, *keyed], env=env, timeout=90)

    deadline = time.monotonic() + 60
    while True:  # a master known to the host asked (elections settle first)
        shown = admin("show", "--via", f"{lab.hosts[0].address}:{BACKBONE_PORT}")
        assert shown.returncode == 0, shown.stderr.decode()
        view = json.loads(shown.stdout)
        if view["master"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    master = view["master"]
    assert master, view
    names = [f"H{i}" for i in range(3)]
    via = next(h for h in names if h != master)
    target = next(h for h in names if h not in (master, via))
    via_addr = f"{lab.hosts[int(via[1:])].address}:{BACKBONE_PORT}"
    for _ in range(10):  # exit 1: the deployment cannot do it right now, try again
        done = admin("retire", "--id", target, "--via", via_addr)
        if done.returncode != 1:
            break
        time.sleep(0.5)
    out, err = done.stdout.decode().strip(), done.stderr.decode()
    assert done.returncode == 0, (out, err)
    printed = re.fullmatch(rf"m2mc host retire: {target} retired: "
                           r"(committed at log position (\d+); .*\(quorum 2 of 2\))", out)
    assert printed, out
    # the retired host stops by itself (it applied the record, or the master told it)
    index = int(target[1:])
    retired = hosts[index]
    wait_until(lambda: retired.process.poll() is not None, f"{target} to stop", 60,
               retired.err.snapshot)
    assert retired.finish() == 2, retired.err.snapshot()[-5:]
    assert any(f"{target} is retired from this deployment" in line
               for line in retired.err.snapshot()), retired.err.snapshot()[-5:]
    # started again with an empty log, it is told by the master (RetiredNotice)
    again = start_host(index)
    hosts.append(again)
    wait_until(lambda: again.process.poll() is not None, f"{target} to stop again", 60,
               again.err.snapshot)
    assert again.finish() == 2, again.err.snapshot()[-5:]
    told = f"{target} is retired from this deployment (retired at log position " \
           f"{printed.group(2)} (told by {master}))"
    assert any(told in line for line in again.err.snapshot()), again.err.snapshot()[-5:]
    return {"master": master, "via": via, "target": target, "operator": operator.address,
            "shown": shown.stdout.decode().strip(), "text": printed.group(1),
            "lsn": printed.group(2)}


def run_deployment(lab: Lab, tmp_path: Path, suite: str | None) -> tuple[
        Path, Path, Path, dict[str, Any]]:
    env = child_env(tmp_path)
    members_trace, hosts_trace = tmp_path / "members", tmp_path / "hosts"
    members_trace.mkdir()
    hosts_trace.mkdir()
    keyed: list[str] = []
    if suite is not None:
        key_file = tmp_path / "deploy.key"
        key_file.write_text(subprocess.run(
            [sys.executable, "-c", "from m2mc.security import generate_key; "
             "print(generate_key())"], capture_output=True, text=True, check=True,
            env=env).stdout)
        key_file.chmod(0o600)
        keyed = ["--key-file", str(key_file), "--suite", suite]
    pcap = tmp_path / "infra.pcapng"
    go = tmp_path / "go"
    hosts, members = [], []

    def start_host(i: int) -> Child:
        host = lab.hosts[i]
        peers = [f"{h.address}:{BACKBONE_PORT}" for h in lab.hosts[:3] if h is not host]
        return Child(lab, host, [
            *M2MC, "host", "--id", f"H{i}", "--listen", f"{host.address}:{BACKBONE_PORT}",
            "--peer", ",".join(peers), "--cell", cell_url(i, host.address),
            "--uplink", f"{host.address}:{UPLINK_PORT}", "--trace-dir", str(hosts_trace),
            "--run-id", "ws-infra", *keyed], env)

    with Capture(lab, pcap) as capture:
        try:
            for i in range(3):
                hosts.append(start_host(i))
            for i, h in enumerate(hosts):
                wait_until(h.err.has(f"H{i} up"), f"host H{i}", 30, h.err.snapshot)
            wait_until(lambda: elections(trace_rows(hosts_trace), "active"), "a master", 30)
            here = lab.hosts[3]
            cells = ",".join(cell_url(i, here.address) for i in range(3))
            for pid, cell in MEMBERS.items():
                members.append(Child(lab, here, [
                    sys.executable, str(HERE / "infra_member.py"), "--pid", pid, "--cells", cells,
                    "--cell", str(cell), "--trace", str(members_trace), "--peers",
                    ",".join(MEMBERS), "--send", str(SEND), "--go", str(go), *keyed], env))
            for pid, m in zip(MEMBERS, members, strict=True):
                wait_until(m.err.has(f"{pid} joined"), f"{pid} to join", 60, m.err.snapshot)
            go.touch()
            for pid, m in zip(MEMBERS, members, strict=True):
                wait_until(m.err.has(f"{pid} done"), f"{pid} to deliver everything", 90,
                           m.err.snapshot)
            for child in members:  # the members' runs are over: retiring changes none
                child.stop()
            admin = retire_a_host(lab, env, hosts, start_host, keyed)
        finally:
            for child in members + hosts:
                child.stop()
    assert capture.stats.get("dropped") == 0, capture.stats
    return pcap, members_trace, hosts_trace, admin


def _claims() -> dict[int, str]:
    """tag -> the field naming the sender (m2mc.infra.wire.claimed_sender)."""
    tags = infra_codec._TAGS
    out = {tags[cls]: "node" for cls in infra_wire._UPLINK}
    out.update({tags[cls]: "host" for cls in infra_wire._BY_HOST})
    out.update({tags[im.Vote]: "voter", tags[im.Takeover]: "master",
                tags[im.AdminRequest]: "client"})
    return out


CLAIMS = _claims()
ADMIN_FIELDS = ("client", "request", "op", "target", "host", "code", "text", "lsn")


def frames(packets: list[Packet]) -> list[dict[str, Any]]:
    """Every infrastructure frame decoded, with the transport it came by."""
    out = []
    for p in packets:
        via = "tcp" if "tcp" in p.protocols else "udp"
        for proto in p.protos("m2mc_infra"):
            tag_field = proto.first("m2mc_infra.tag")
            tag = None if tag_field is None else int(tag_field.show)
            claim = CLAIMS.get(tag or 0)
            claimed = proto.direct(f"m2mc_infra.{claim}") if claim else []
            out.append({
                "via": via, "link": proto.value("m2mc_infra.link"), "tag": tag,
                "name": None if tag_field is None else
                tag_field.showname.split(": ", 1)[1].rsplit(" (", 1)[0],
                "src": p.tree.value("ip.src"), "dst": p.tree.value("ip.dst"),
                "dst_port": p.tree.value("udp.dstport") or p.tree.value("tcp.dstport"),
                "items": proto.values("m2mc_infra.item.app_mid"),
                "records": [(r.value("m2mc_infra.record.kind"), r.value("m2mc_infra.record.mid"),
                             r.value("m2mc_infra.record.app_mid"),
                             int(r.value("m2mc_infra.record.gseq") or -1))
                            for r in proto.all("m2mc_infra.record")],
                "host_records": [(r.value("m2mc_infra.record.kind"),
                                  r.value("m2mc_infra.record.host"),
                                  r.value("m2mc_infra.record.lsn"))
                                 for r in proto.all("m2mc_infra.record")
                                 if r.first("m2mc_infra.record.host") is not None],
                "admin": {name: found[0].show for name in ADMIN_FIELDS
                          if (found := proto.direct(f"m2mc_infra.{name}"))},
                "receiver": proto.value("m2mc_infra.receiver"),
                "epoch": proto.value("m2mc_infra.epoch"),
                "master": proto.value("m2mc_infra.master"),
                "sealed": proto.value("m2mc_infra.sealed") == "1",
                "auth_sender": proto.value("m2mc_auth.sender"),
                "claimed": claimed[0].show if claimed else None})
    return out


@pytest.mark.parametrize("suite", [None, "hmac-sha256"], ids=["unkeyed", "keyed"])
def test_hosts_and_members_captured_decoded_and_matching_the_traces(
        lab: Lab, tmp_path: Path, suite: str | None) -> None:
    pcap, members_trace, hosts_trace, admin = run_deployment(lab, tmp_path, suite)
    packets = dissect(pcap)
    assert [(p.number, p.problems) for p in packets if p.problems] == []
    assert undecoded_frames(packets) == []
    seen = frames(packets)
    names = Counter(f"{f['link']} {f['name']}" for f in seen)
    print(json.dumps({"suite": suite, "packets": len(packets), "frames": len(seen),
                      "greetings": sum(len(p.tree.all("m2mc_backbone.peer")) for p in packets),
                      "kinds": dict(sorted(names.items()))}))
    hosts = {h.address: f"H{i}" for i, h in enumerate(lab.hosts[:3])}
    for f in seen:
        assert f["tag"] is not None  # nothing left undecoded (HMAC bodies are in clear)
        if f["via"] == "tcp":
            assert f["link"] == "backbone", f
            assert f["src"] in hosts or (f["name"] == "AdminRequest"
                                         and f["src"] == admin["operator"]), f
            assert f["dst_port"] is not None
        elif f["link"] == "uplink":
            assert f["dst_port"] == str(UPLINK_PORT) and f["src"] == lab.hosts[3].address, f
        else:
            assert f["link"] == "downlink" and f["src"] in hosts, f
        assert f["sealed"] == (suite is not None), f
        if suite is not None and f["claimed"] is not None:
            assert f["auth_sender"] == f["claimed"], f  # sealed by the one it names
    assert {f["link"] for f in seen} == {"uplink", "downlink", "backbone"}
    assert sum(len(p.tree.all("m2mc_backbone.peer")) for p in packets) >= 6  # 3 hosts x 2

    rows = trace_rows(members_trace)
    # the NEW items on the uplinks are what the members sent
    sent = {r["mid"] for r in rows if r["event"] == "send"}
    assert len(sent) == SEND * len(MEMBERS)
    assert {mid for f in seen if f["link"] == "uplink" for mid in f["items"]} == sent
    # what the cells broadcast is what the members delivered, message and gseq
    delivered = {(r["mid"], r["gseq"]) for r in rows if r["event"] == "deliver"}
    cell_records = {(mid, gseq) for f in seen if f["link"] == "downlink"
                    for kind, _, mid, gseq in f["records"] if kind == "0"}
    assert cell_records == delivered and {mid for mid, _ in delivered} == sent
    joined = {(detail(r)["member"], r["gseq"]) for r in rows if r["event"] == "join"}
    cell_joins = {(mid, gseq) for f in seen if f["link"] == "downlink"
                  for kind, mid, _, gseq in f["records"] if kind == "1"}
    assert joined <= cell_joins and len(joined) == len(MEMBERS)
    # the coordinator's log on the backbone holds every multicast
    logged = {(mid, gseq) for f in seen if f["via"] == "tcp"
              for kind, _, mid, gseq in f["records"] if kind == "0"}
    assert delivered <= logged
    # every Takeover is an election a host won; the master's is among them
    host_rows = trace_rows(hosts_trace)
    won = set(elections(host_rows, "won"))
    takeovers = {(f["master"], f["epoch"]) for f in seen if f["name"] == "Takeover"}
    assert takeovers and takeovers <= won
    assert set(elections(host_rows, "active")) <= takeovers
    check_retirement(seen, packets, host_rows, admin, {v: k for k, v in hosts.items()},
                     keyed=suite is not None)


def check_retirement(seen: list[dict[str, Any]], packets: list[Packet],
                     host_rows: list[dict[str, Any]], admin: dict[str, Any],
                     address: dict[str, str], keyed: bool) -> None:
    """The operator's requests, their way to the master and back, the RETIRED record and
    the RetiredNotice, as the capture shows them, against what the commands printed."""
    master, via, target, lsn = admin["master"], admin["via"], admin["target"], admin["lsn"]

    def named(name: str) -> list[dict[str, Any]]:
        return [f for f in seen if f["name"] == name]

    # the command lines' requests: ours (show), then retire's show and its change (again
    # if the deployment said "try again"), each command on a connection of its own that
    # announced the operator's name
    requests = named("AdminRequest")
    assert all(f["src"] == admin["operator"] and f["dst_port"] == str(BACKBONE_PORT)
               for f in requests), requests
    ops = [(f["admin"]["op"], f["admin"]["target"]) for f in requests]
    assert ops[0] == ("0", "") and ops[1:] == [("0", ""), ("1", target)] * (len(ops) // 2), ops
    change = requests[-1]["admin"]
    client = change["client"]
    greetings = {g for p in packets for g in p.tree.values("m2mc_backbone.peer")}
    assert {f["admin"]["client"] for f in requests} <= greetings
    assert client.startswith("operator-") and change["request"] == "2"
    if keyed:  # the change is sealed for the host that answered the first request
        assert [f["receiver"] for f in requests[-2:]] == ["", via]
    # the host asked passes it to the master, whose answer comes back to it
    [reconfig] = [f for f in named("Reconfig") if f["admin"]["client"] == client]
    assert reconfig["src"] == address[via] and reconfig["dst"] == address[master]
    assert reconfig["admin"] == {"host": via, "client": client, "request": "2", "op": "1",
                                 "target": target}
    results = named("AdminResult")
    done = {"client": client, "request": "2", "code": "ok", "text": admin["text"], "lsn": lsn}
    assert [f for f in results if f["src"] == address[master]
            and f["admin"] == {"host": master, **done}], results
    # and the operator gets what it printed (and the view ``show`` printed)
    to_operator = [f for f in results if f["dst"] == admin["operator"]]
    assert [f["admin"] for f in to_operator if f["admin"]["request"] == "2"][-1] == {
        "host": via, **done}
    assert admin["shown"] in [f["admin"]["text"] for f in to_operator]
    # the RETIRED record: at the position printed, on the backbone only; the master's
    # trace appended it for that client
    host_records = {(kind, host, at) for f in seen for kind, host, at in f["host_records"]}
    retired = {r for r in host_records if r[0] == "5"}
    assert retired and retired == {("5", target, lsn)}, retired
    # besides it, only the sequence's first record (GENESIS, at log position 1, founded
    # by the first master) names a host
    assert {r[0] for r in host_records} <= {"5", "7"}, host_records
    assert all(at == "1" for kind, _, at in host_records if kind == "7"), host_records
    assert all(f["via"] == "tcp" for f in seen if f["host_records"])
    assert [(r["node"], detail(r)) for r in host_rows if r["event"] == "elect"
            and detail(r).get("phase") == "retire"] == [
        (master, {"phase": "retire", "target": target, "lsn": int(lsn), "client": client})]
    # the retired host, started again, is told so by the master
    notices = named("RetiredNotice")
    assert notices and all(f["src"] == address[master] and f["dst"] == address[target]
                           and f["admin"] == {"host": master, "target": target, "lsn": lsn}
                           for f in notices), notices
