"""m2mc.native's choice: the compiled loops where they were built from this source,
the Python everywhere else, and a stale build refused out loud.

``make test`` sets ``M2MC_REQUIRE_NATIVE=1`` for its main run: there a machine that
did not build (or load) the extension fails here instead of skipping its tests; .ci/run
installs a compiler and Python's headers first.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import weakref
from pathlib import Path
from typing import Any

import pytest

from m2mc import native
from m2mc.api.message import GroupMessage
from m2mc.errors import DecodeError
from m2mc.group import codec
from m2mc.group.wire_bounds import MAX_LIST, MAX_PID, MAX_SEQ, read_vclock
from m2mc.native import layout
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.wire import packet

SOURCE = Path(native.__file__).with_name("_speedups.c")
REQUIRED = os.environ.get("M2MC_REQUIRE_NATIVE", "") not in ("", "0")

needs_native = pytest.mark.skipif(native.NATIVE is None, reason=native.STATUS.reason)


def _compiler() -> list[str] | None:
    """The C compiler and the flags to build an extension with, or None."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    include = Path(sysconfig.get_paths()["include"])
    if shutil.which(cc[0]) is None or not (include / "Python.h").exists():
        return None
    return [*cc, "-shared", "-fPIC", "-O0", f"-I{include}"]


def _without_compiler(what: str) -> None:
    if REQUIRED:
        pytest.fail(f"M2MC_REQUIRE_NATIVE is set but there is no C compiler with Python's "
                    f"headers: {what}")
    pytest.skip(f"no C compiler with Python's headers: {what}")


def test_the_compiled_path_is_in_use_wherever_it_can_be() -> None:
    """With M2MC_REQUIRE_NATIVE set (make test), or wherever a compiler is, the
    extension must be built, loaded and bound, every loop of it."""
    if native.pure_forced():
        pytest.skip("M2MC_PURE is set: the Python path is the one asked for")
    if not REQUIRED and _compiler() is None:
        pytest.skip("no C compiler: the pure-Python path is the one expected")
    assert native.STATUS.loaded, f"the compiled loops are not in use: {native.STATUS.reason}"
    assert native.NATIVE is not None and native.classes_bound()
    assert codec._records is native.NATIVE.records
    assert codec.record_size is native.NATIVE.record_size
    assert native.consecutive is native.NATIVE.consecutive


PROBE = """
import json
from m2mc import native
from m2mc.api import inbox
from m2mc.group import codec, node_output
from m2mc.store import sqlite
from m2mc.wire import segments
print(json.dumps({
    "loaded": native.STATUS.loaded, "stale": native.STATUS.stale,
    "reason": native.STATUS.reason, "bound": native.classes_bound(),
    "python": [codec._records is codec.records_py, codec.record_size is codec.record_size_py,
               segments.consecutive is native.consecutive_py, native._PACK is None,
               native._FRAGMENTS is None, inbox.TAKE_MESSAGES is None,
               node_output._STREAM_HEADS is None, sqlite._PUT_RECORDS is None,
               codec._PACK_RECORDS is None],
}))
"""


def _probe(**env: str) -> tuple[dict[str, Any], str]:
    """What a fresh process chooses under ``env`` (M2MC_PURE only if given there)."""
    inherited = {k: v for k, v in os.environ.items() if k != "M2MC_PURE"}
    run = subprocess.run([sys.executable, "-c", PROBE], env={**inherited, **env},
                         capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(run.stdout)
    return result, run.stderr


def test_m2mc_pure_forces_every_loop_to_the_python() -> None:
    found, _ = _probe(M2MC_PURE="1")
    assert found == {"loaded": False, "stale": False, "reason": "M2MC_PURE is set",
                     "bound": False, "python": [True] * 9}


def test_a_stale_build_falls_back_to_python_and_says_so(tmp_path: Path) -> None:
    """A module built from an older _speedups.c (another ABI) or for another layout
    (here another packet size) is not used: every loop runs its Python, STATUS says
    why, and a warning says so on stderr. The current source, built the same way and
    loaded from the same kind of path, is used."""
    cc = _compiler()
    if cc is None:
        _without_compiler("a stale build cannot be made")
    builds = {"abi": ["-DM2MC_NATIVE_ABI=1"], "layout": ["-DM2MP_SEGMENT=1400"], "fresh": []}
    jobs = []
    for name, flags in builds.items():
        (tmp_path / name).mkdir()
        jobs.append(subprocess.Popen([*cc, *flags, str(SOURCE), "-o",
                                      str(tmp_path / name / "_speedups.so")]))
    assert [job.wait() for job in jobs] == [0, 0, 0]
    for name, expected in (("abi", "built for ABI 1, this m2mc is ABI 2"),
                           ("layout", "m2mp:1400,8,")):
        found, stderr = _probe(M2MC_NATIVE_PATH=str(tmp_path / name / "_speedups.so"))
        assert found["python"] == [True] * 9 and not found["loaded"] and not found["bound"]
        assert found["stale"] and expected in found["reason"]
        assert "the compiled" in stderr and "is stale" in stderr and expected in stderr
    found, stderr = _probe(M2MC_NATIVE_PATH=str(tmp_path / "fresh" / "_speedups.so"))
    assert found["loaded"] and found["bound"] and found["python"] == [False] * 9
    assert "stale" not in stderr


def test_the_layout_is_that_of_the_classes_and_the_packets() -> None:
    """m2mc.native.layout (what the C is built for) against what the Python defines."""
    assert (layout.M2MP_SEGMENT, layout.M2MP_HEADER, layout.M2MP_LAST) == (
        packet.MAX_PACKET, packet.HEADER_SIZE, packet.LAST_FLAG)
    for cls, slots in ((MessageId, layout.MESSAGE_ID_SLOTS), (Message, layout.MESSAGE_SLOTS),
                       (GroupMessage, layout.GROUP_MESSAGE_SLOTS)):
        assert tuple(f.name for f in dataclasses.fields(cls)) == slots == cls.__slots__
    assert layout.fnv1a64(layout.LAYOUT) == layout.LAYOUT_HASH
    assert layout.fnv1a64("") == 0xCBF29CE484222325 and layout.fnv1a64("a") == 0xAF63DC4C8601EC8C
    if native.NATIVE is not None:
        assert (native.NATIVE.ABI, native.NATIVE.LAYOUT, native.NATIVE.LAYOUT_HASH) == (
            layout.ABI, layout.LAYOUT, layout.LAYOUT_HASH)


@needs_native
def test_a_builder_in_a_cycle_with_its_class_is_freed() -> None:
    """A slot builder holds its class; a class that holds its builder (or whose module
    does) makes a cycle, which the garbage collector must see through."""
    assert native.NATIVE is not None

    @dataclasses.dataclass(frozen=True, slots=True)
    class Probe:
        a: int
        b: str

    build = native.NATIVE.slot_builder(Probe, ("a", "b"))
    assert build(1, "x") == Probe(1, "x")
    Probe.build = build  # type: ignore[attr-defined]  # the cycle
    gone = weakref.ref(Probe)
    del Probe, build
    gc.collect()
    assert gone() is None


@needs_native
@pytest.mark.parametrize("record_too", [False, True])
def test_the_decoder_survives_a_vclock_reader_that_frees_the_record(record_too: bool) -> None:
    """The decoder calls back into Python for each vector clock; code there that
    empties the list (freeing the record: make native-check's AddressSanitizer sees a
    read of it), or the record too, changes nothing about the record already read, and
    ends the loop, as in the Python (which iterates the list)."""
    assert native.NATIVE is not None
    pid, payload = "x" * 40 + "-pid", b"p" * 64
    raw: list[Any] = [[pid, 1, "", 0, payload, None, {pid: 1}], [pid, 2, "", 0, payload]]

    def hostile(clock: Any, max_seq: int) -> dict[str, int]:
        if record_too:
            raw[0].clear()
        raw.clear()
        gc.collect()
        return read_vclock(clock, max_seq)

    try:
        native.NATIVE.setup_records(DecodeError, hostile, MAX_PID, MAX_LIST)
        out = native.NATIVE.records(raw, MAX_SEQ)
    finally:  # (the module's state is the process's)
        native.NATIVE.setup_records(DecodeError, read_vclock, MAX_PID, MAX_LIST)
    assert out == [Message(MessageId(pid, 1), ROOT, payload, {pid: 1})]


@needs_native
def test_bad_numbers_raise_their_own_error() -> None:
    """Each argument converted is checked before the next is read."""
    assert native.NATIVE is not None
    with pytest.raises(TypeError):
        native.NATIVE.put_records({}, [], "0", True, "1", 64)
    with pytest.raises(OverflowError):
        native.NATIVE.put_records({}, [], 0, True, 2**70, 2**70)
    with pytest.raises(TypeError):
        native.NATIVE.consecutive(b"x" * 8, "1", 2**70, -1)
    with pytest.raises(OverflowError):
        native.NATIVE.consecutive(b"x" * 8, 1, 2**70, -1)
    assert native.NATIVE.consecutive(b"\0" * 8, 1, 0, 0) == 0
