"""The group stack's shared decoding (m2mc.sim.decode_memo): a run is the same with it
and without it, nothing a node does changes a decoded body another node got, and a
body that fails to decode is counted by every receiver."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from m2mc.errors import DecodeError
from m2mc.group.codec import Kind, decode_body
from m2mc.sim import decode_memo, run_scenario


def scenario(keyed: bool) -> dict[str, Any]:
    stack: dict[str, Any] = {"kind": "group"}
    if keyed:
        stack["passphrase"] = "correct horse battery staple"
    return {
        "name": "memo", "run": {"chaos": 6.0, "heal": 4.0}, "stack": stack,
        "nodes": {"count": 12, "domain": "lan"},
        "domains": {"lan": {"delay": {"dist": "uniform", "low": 0.001, "high": 0.01},
                            "loss": 0.15, "duplicate": 0.05, "reorder": 0.1}},
        "groups": [{"name": "chat", "order": "sb", "rate": 6.0, "messages": 30},
                   {"name": "ops", "order": "total", "rate": 3.0, "messages": 15}],
    }


def digests(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("keyed", [False, True])
def test_a_run_is_the_same_with_the_memo_and_without(tmp_path: Path, keyed: bool,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    memo = decode_memo.DecodeMemo()
    monkeypatch.setattr(decode_memo, "SHARED", memo)
    shared = run_scenario(scenario(keyed), 3, tmp_path / "memo")
    assert memo.hits > 5 * memo.misses  # 11 receivers of each datagram, 15% loss
    monkeypatch.setattr(decode_memo, "SHARED", SimpleNamespace(decode=decode_body))
    alone = run_scenario(scenario(keyed), 3, tmp_path / "alone")
    assert shared.counters == alone.counters
    assert digests(tmp_path / "memo") == digests(tmp_path / "alone")
    # Nothing any node did changed what it was handed: each body still equals a fresh
    # decoding of its bytes.
    entries = memo.entries()
    assert entries
    for kind, max_seq, data, found in entries:
        assert decode_body(kind, data, max_seq=max_seq) == found


def test_a_malformed_body_fails_at_every_receiver() -> None:
    memo = decode_memo.DecodeMemo()
    for _ in range(3):
        with pytest.raises(DecodeError, match="malformed group message body"):
            memo.decode(int(Kind.DATA), b"\xc1")
    assert (memo.misses, memo.hits) == (1, 2)


def test_the_memo_keeps_the_last_bodies_only() -> None:
    memo = decode_memo.DecodeMemo(limit=2)
    bodies = [decode_memo.DecodeMemo().decode(int(Kind.LEAVE), b"\x92\xa1" + bytes([c]) + b"\x01")
              for c in b"abc"]
    for c in b"abc":
        memo.decode(int(Kind.LEAVE), b"\x92\xa1" + bytes([c]) + b"\x01")
    assert [found for *_, found in memo.entries()] == bodies[1:]
