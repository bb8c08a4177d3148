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
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
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


def run_deployment(lab: Lab, tmp_path: Path, suite: str | None) -> tuple[Path, Path, Path]:
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
    with Capture(lab, pcap) as capture:
        try:
            for i, host in enumerate(lab.hosts[:3]):
                peers = [f"{h.address}:{BACKBONE_PORT}" for h in lab.hosts[:3] if h is not host]
                hosts.append(Child(lab, host, [
                    *M2MC, "host", "--id", f"H{i}", "--listen", f"{host.address}:{BACKBONE_PORT}",
                    "--peer", ",".join(peers), "--cell", cell_url(i, host.address),
                    "--uplink", f"{host.address}:{UPLINK_PORT}", "--trace-dir", str(hosts_trace),
                    "--run-id", "ws-infra", *keyed], env))
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
        finally:
            for child in members + hosts:
                child.stop()
    assert capture.stats.get("dropped") == 0, capture.stats
    return pcap, members_trace, hosts_trace


def _claims() -> dict[int, str]:
    """tag -> the field naming the sender (m2mc.infra.wire.claimed_sender)."""
    tags = infra_codec._TAGS
    out = {tags[cls]: "node" for cls in infra_wire._UPLINK}
    out.update({tags[cls]: "host" for cls in infra_wire._BY_HOST})
    out.update({tags[im.Vote]: "voter", tags[im.Takeover]: "master"})
    return out


CLAIMS = _claims()


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
                "src": p.tree.value("ip.src"),
                "dst_port": p.tree.value("udp.dstport") or p.tree.value("tcp.dstport"),
                "items": proto.values("m2mc_infra.item.app_mid"),
                "records": [(r.value("m2mc_infra.record.kind"), r.value("m2mc_infra.record.mid"),
                             r.value("m2mc_infra.record.app_mid"),
                             int(r.value("m2mc_infra.record.gseq") or -1))
                            for r in proto.all("m2mc_infra.record")],
                "epoch": proto.value("m2mc_infra.epoch"),
                "master": proto.value("m2mc_infra.master"),
                "sealed": proto.value("m2mc_infra.sealed") == "1",
                "auth_sender": proto.value("m2mc_auth.sender"),
                "claimed": claimed[0].show if claimed else None})
    return out


@pytest.mark.parametrize("suite", [None, "hmac-sha256"], ids=["unkeyed", "keyed"])
def test_hosts_and_members_captured_decoded_and_matching_the_traces(
        lab: Lab, tmp_path: Path, suite: str | None) -> None:
    pcap, members_trace, hosts_trace = run_deployment(lab, tmp_path, suite)
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
            assert f["src"] in hosts and f["dst_port"] is not None
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
