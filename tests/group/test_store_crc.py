"""The payload files' CRC-32 (m2mc.store.crc) is zlib's function whichever module
computes it: zlib-ng's when the ``fast`` extra is installed, the standard library's
otherwise. A log written with one is read back, and its damage found, with the other."""

from __future__ import annotations

import importlib
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from m2mc.ordering import ROOT, Message, MessageId
from m2mc.store import crc as crc_module
from m2mc.store import payload_files as payload_files_module
from m2mc.store.sqlite import SqliteStore

G = "g"


@given(st.binary(max_size=200_000))
def test_the_crc_in_use_is_zlib_s(data: bytes) -> None:
    assert crc_module.crc32(data) == zlib.crc32(data)


def test_the_fast_crc_is_in_use_where_the_fast_extra_is_installed() -> None:
    zlib_ng = pytest.importorskip("zlib_ng.zlib_ng")
    assert crc_module.IMPLEMENTATION == "zlib-ng"
    assert crc_module.crc32 is zlib_ng.crc32


def test_without_zlib_ng_zlib_s_crc_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "zlib_ng", None)  # an import of it fails
    monkeypatch.setitem(sys.modules, "zlib_ng.zlib_ng", None)
    try:
        importlib.reload(crc_module)
        assert crc_module.IMPLEMENTATION == "zlib"
        assert crc_module.crc32 is zlib.crc32
    finally:
        monkeypatch.undo()
        importlib.reload(crc_module)


def message(seq: int) -> Message:
    return Message(MessageId("a", seq), ROOT, bytes([seq]) * 65536, None, None)


@pytest.mark.parametrize("writer,reader", [("fast", "zlib"), ("zlib", "fast")])
def test_a_log_written_with_one_crc_reads_with_the_other(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str, reader: str) -> None:
    pytest.importorskip("zlib_ng.zlib_ng")
    implementations = {"fast": crc_module.crc32, "zlib": zlib.crc32}
    path = tmp_path / "log.db"
    monkeypatch.setattr(payload_files_module, "crc32", implementations[writer])
    store = SqliteStore(path)
    store.put_delivered(G, [message(1), message(2)])
    store.close()
    segment = path.with_name("log.db-payloads") / "00000001.seg"
    data = bytearray(segment.read_bytes())
    data[65536 + 7] ^= 1  # the second payload, damaged
    segment.write_bytes(bytes(data))
    monkeypatch.setattr(payload_files_module, "crc32", implementations[reader])
    store = SqliteStore(path)
    assert [s.message for s in store.load_messages(G)] == [message(1)]
    assert store._payloads is not None and store._payloads.unreadable == 1
    store.close()
