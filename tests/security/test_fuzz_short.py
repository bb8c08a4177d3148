"""A short fuzz run of every registered decoder: only typed errors come out, bounds hold."""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from m2mc.errors import DecodeError
from m2mc.fuzz_targets import (
    COVERED,
    EXEMPT,
    BoundViolation,
    FuzzTarget,
    find_decoders,
    load_targets,
)
from m2mc.fuzzer import MutationalFuzzer, mutate

ROOT = Path(__file__).resolve().parents[2]
TARGETS, _unavailable = load_targets()
SHORT_RUN = 600
# Targets that drive a whole node per input (about 0.1 s each on CI's cores) run fewer:
# 600 of theirs took two minutes of CI's test time. bench/fuzz.py runs them long.
SHORT_RUN_OF = {"group.node": 200, "infra.host": 200}


def test_registry_covers_the_decoders_that_exist() -> None:
    names = {t.name for t in TARGETS}
    assert {"m2mp.packet", "m2mp.reassembly", "m2mp.layer", "transport.frames",
            "transport.url", "ordering.message_id", "security.open_hmac",
            "security.open_aead", "security.groupwire"} <= names
    assert ("group.frame" in names) == _exists("m2mc.group.codec")
    assert ("group.node" in names) == _exists("m2mc.group.manager")
    assert ("infra.frame" in names) == _exists("m2mc.infra.codec")
    for name in ("infra.payload", "infra.backbone_stream", "infra.address"):
        assert (name in names) == _exists("m2mc.infra_runtime.net")


def _decoders_in_sources() -> set[str]:
    found: set[str] = set()
    for path in sorted((ROOT / "src").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT / "src").with_suffix("").parts)
        found.update(find_decoders(path.read_text(encoding="utf-8"), module))
    return found


def test_every_decoder_in_the_sources_is_fuzzed_or_exempted_with_a_reason() -> None:
    found = _decoders_in_sources()
    unlisted = sorted(found - COVERED.keys() - EXEMPT.keys())
    assert not unlisted, (f"decoders neither fuzzed nor exempted: {unlisted}; add a target "
                          "(m2mc.fuzz_targets.COVERED) or a reason (EXEMPT)")
    stale = sorted((COVERED.keys() | EXEMPT.keys()) - found)
    assert not stale, f"listed decoders that no longer exist: {stale}"
    assert not COVERED.keys() & EXEMPT.keys()
    names = {t.name for t in TARGETS}
    assert set(COVERED.values()) <= names, sorted(set(COVERED.values()) - names)
    assert all(reason.strip() for reason in EXEMPT.values())


def test_the_decoder_scan_finds_functions_and_methods() -> None:
    source = (
        "def decode_thing(b): ...\n"
        "def _unpack(b): ...\n"
        "async def parse_more(t): ...\n"
        "def encode(x): ...\n"
        "class Reader:\n"
        "    def feed(self, b): ...\n"
        "    class Inner:\n"
        "        def open_frame(self, b): ...\n"
        "def split_frame(b): ...\n"
        "def outer():\n"
        "    def decode_local(b): ...\n"
    )
    assert set(find_decoders(source, "m")) == {
        "m:decode_thing", "m:_unpack", "m:parse_more", "m:Reader.feed",
        "m:Reader.Inner.open_frame", "m:split_frame"}


def _exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its package is not there at all
        return False


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_short_fuzz_run_only_typed_errors(target: FuzzTarget) -> None:
    fuzzer = MutationalFuzzer(target, random.Random(f"test:{target.name}"), max_len=1024)
    inputs = SHORT_RUN_OF.get(target.name, SHORT_RUN)
    report = fuzzer.run(inputs)
    assert report.crashes == [], report.crashes[0].traceback if report.crashes else ""
    assert report.inputs == inputs == sum(report.outcomes.values())
    # The engine files anything outside target.expected under "CRASH <type>".
    assert not [outcome for outcome in report.outcomes if outcome.startswith("CRASH")]
    # Mutations reach code the seeds alone do not.
    assert report.corpus > 0 and report.edges > 0


def test_a_crash_is_recorded_with_its_input_and_fuzzing_goes_on() -> None:
    def fragile(data: bytes) -> None:
        if len(data) > 8:
            raise KeyError("oops")
        if data[:1] == b"\xff":
            raise BoundViolation("table over bound")
        if not data:
            raise DecodeError("empty")

    target = FuzzTarget("fragile", fragile, lambda: [b"", b"abc"])
    fuzzer = MutationalFuzzer(target, random.Random(3), max_crashes=5)
    report = fuzzer.run(2000)
    assert report.inputs == 2000
    assert report.crash_count == report.outcomes.get("CRASH KeyError", 0) + report.outcomes.get(
        "CRASH BoundViolation", 0) > 0
    assert report.outcomes.get("DecodeError", 0) >= 1
    errors = {c.error.split(":")[0] for c in report.crashes}
    assert "KeyError" in errors
    assert all(len(c.data) > 8 or c.data[:1] == b"\xff" for c in report.crashes)
    assert report.as_dict()["crashes"] == report.crash_count


def test_mutate_respects_max_len_and_is_deterministic() -> None:
    a = [mutate(b"seed" * 10, random.Random(5), [b"xyz"], 32) for _ in range(3)]
    rng = random.Random(9)
    outs = [mutate(b"seed" * 50, rng, [b"other"], 64) for _ in range(500)]
    assert all(len(o) <= 64 for o in outs)
    assert a[0] == a[1] == a[2]


@pytest.mark.skipif(importlib.util.find_spec("atheris") is None, reason="atheris not installed")
def test_bench_fuzz_with_atheris_reports_json_counts(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "fuzz.py"), "--engine", "atheris",
         "--inputs", "3000", "--targets", "ordering.message_id",
         "--artifacts", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(out.stdout)
    assert summary["ok"] is True and summary["engine"] == "atheris"
    for name in ("ordering.message_id",):
        counts = summary["targets"][name]
        assert counts["inputs"] == 3000 == sum(counts["outcomes"].values())
        assert set(counts["outcomes"]) <= {"ok", "DecodeError"}
