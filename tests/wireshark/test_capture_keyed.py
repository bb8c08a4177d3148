"""Keyed groups in a real run: HMAC-SHA256 (bodies in clear, decoded) and AES-256-GCM
(bodies encrypted, shown as such), captured and decoded.

Two nodes join both groups with one key file and send; b advertises, and a's
GRPS_INFO says both groups are keyed. Every message of the two groups carries the
authentication header, sealed by the node that sent it (the trace's node), with a
fresh counter per transmission; in the HMAC group the DATA records are the messages
the traces say were sent; in the AES group nothing of the bodies is decoded. Both
nodes have display names: the HMAC group's JOIN and STATUS show them, and the
GRPS_INFO entries of the keyed groups carry none (a keyed group's names travel sealed
only).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from capture import Capture, GroupNode, child_env, trace_rows
from dissection import dissect, needs_dumpcap, needs_tshark, undecoded_frames
from netns_lab import Lab
from test_capture_group import channel, group_messages, tag

pytestmark = [pytest.mark.netns, pytest.mark.slow, needs_tshark, needs_dumpcap]

HMAC, AES = "ws-keyed-hmac", "ws-keyed-aes"
NAMES = {"a": "Ann", "b": "Bén ✓"}


def test_keyed_groups_show_their_authentication_and_hide_encrypted_bodies(
        lab: Lab, tmp_path: Path) -> None:
    env = child_env(tmp_path)
    key_file = tmp_path / "group.key"
    key_file.write_text(subprocess.run(
        [sys.executable, "-c", "from m2mc.security import generate_key; print(generate_key())"],
        capture_output=True, text=True, check=True, env=env).stdout)
    key_file.chmod(0o600)
    trace = tmp_path / "trace"
    trace.mkdir()
    pcap = tmp_path / "keyed.pcapng"
    with Capture(lab, pcap) as capture:
        nodes = [GroupNode(lab, host, pid, channel(host.address), trace, env,
                           ["--name", NAMES[pid]])
                 for pid, host in zip("ab", lab.hosts, strict=False)]
        try:
            for n in nodes:
                n.do(f"join {HMAC} sb {key_file} hmac-sha256")
                n.do(f"join {AES} sb {key_file} aes-256-gcm")
            for n in nodes:
                n.do(f"members {HMAC} a,b")
                n.do(f"members {AES} a,b")
            for n in nodes:
                n.do(f"send {HMAC} 3 120")
                n.do(f"send {AES} 3 120")
                n.do(f"send {AES} 1 1600")  # sealed, then cut into M2MP packets
            for n in nodes:
                n.do(f"wait {HMAC} 6")
                n.do(f"wait {AES} 8")
            nodes[1].do("discover")
        finally:
            for n in nodes:
                n.quit()
    assert capture.stats.get("dropped") == 0, capture.stats
    packets = dissect(pcap)
    assert [(p.number, p.problems) for p in packets if p.problems] == []
    assert undecoded_frames(packets) == []
    messages = group_messages(packets)
    rows = trace_rows(trace)
    keyed = {tag(HMAC): "hmac", tag(AES): "aes"}
    kinds = Counter((keyed.get(m["tag"], "open"), m["kind"]) for m in messages)
    print(json.dumps({"packets": len(packets),
                      "kinds": {f"{k} {kind}": n for (k, kind), n in sorted(kinds.items())}}))
    counters: dict[str, list[int]] = defaultdict(list)
    for p in packets:
        if p.tree.first("m2mp.copy_of"):
            continue
        for auth in p.tree.all("m2mc_auth"):
            counters[auth.value("m2mc_auth.sender") or ""].append(
                int(auth.value("m2mc_auth.counter") or 0))
    for m in messages:
        if m["tag"] not in keyed:
            assert m["kind"] in ("ADV", "GRPS_INFO"), m  # discovery is never sealed
            continue
        assert m["auth_sender"] in ("a", "b")
        if keyed[m["tag"]] == "aes":
            assert m["encrypted"] and m["sender"] is None, m  # nothing of the body decoded
        else:
            assert not m["encrypted"] and m["sender"] == m["auth_sender"], m
            if m["kind"] in ("JOIN", "STATUS"):  # in clear under HMAC: the sender's name
                assert m["name"] == NAMES[m["sender"]], m
    # every transmission sealed afresh: a sender's counters never repeat
    assert counters.keys() == {"a", "b"}
    assert all(len(set(c)) == len(c) for c in counters.values())
    # the HMAC group's records are what the traces say was sent, sealed by their sender
    sent = {(r["mid"], r["bytes"]) for r in rows if r["event"] == "send" and r["group"] == HMAC}
    data = {(mid, size) for m in messages if m["kind"] == "DATA" and m["tag"] == tag(HMAC)
            for mid, _, size in m["records"]}
    assert data == sent and len(sent) == 6
    assert all(mid.startswith(f"{m['auth_sender']}:") for m in messages
               if m["kind"] == "DATA" and m["tag"] == tag(HMAC) for mid, _, _ in m["records"])
    # the AES group: as many DATA (kind in clear) as the traces' batches need, bodies hidden
    assert kinds["aes", "DATA"] >= 2 and kinds["aes", "JOIN"] == 2
    # the advertisement answer says both groups are keyed
    infos = [g for p in packets for g in p.tree.all("m2mc.grp")]
    keyed_flags = {g.value("m2mc.grp.gid"): g.value("m2mc.grp.keyed") for g in infos}
    assert keyed_flags == {HMAC: "1", AES: "1"}
    assert [g.first("m2mc.grp.names") for g in infos] == [None] * len(infos)  # sealed only
    assert kinds["hmac", "JOIN"] == 2 and kinds["hmac", "STATUS"] > 0
