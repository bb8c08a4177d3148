"""Golden byte vectors of every wire format (docs/interfaces.md sections 1 and 7-11).

For every vector of the catalogue (golden_cases.py): encoding its value gives
exactly the bytes stored in tests/golden/<layer>.txt, and decoding those bytes gives
the value back. The completeness tests fail when a codec gains a message kind (a
group ``Kind``, an auth ``Suite``, an infrastructure tag or record kind) that has no
vector, so the stored files always cover the whole wire.

A failure of the first kind means the wire changed. If that was meant, run
``PYTHONPATH=src python tests/golden/regenerate.py``, review the diff against the
docs, and commit both; if not, the codec has a bug.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import msgpack
import pytest
from golden_cases import DISCOVERY_KINDS, LAYERS, SUITES, all_vectors
from golden_vectors import Vector, load, parse_file

from m2mc.group import codec as gc
from m2mc.infra import codec as ic
from m2mc.infra import messages as im
from m2mc.security.auth import Suite

VECTORS = all_vectors()
STORED = {layer: load(layer) for layer in LAYERS}
REGENERATE = "run PYTHONPATH=src python tests/golden/regenerate.py and review the diff"


def _stored(vector: Vector) -> list[bytes]:
    stored = STORED[vector.layer].get(vector.name)
    if stored is None:
        pytest.fail(f"no stored bytes for {vector.layer}/{vector.name}: {REGENERATE}")
    return stored


def _by_layer(layer: str) -> list[Vector]:
    return [v for v in VECTORS if v.layer == layer]


@pytest.mark.parametrize("layer", list(LAYERS))
def test_every_vector_is_stored_and_every_stored_one_is_known(layer: str) -> None:
    known = {v.name for v in _by_layer(layer)}
    stored = set(STORED[layer])
    assert not known - stored, \
        f"vectors without stored bytes: {sorted(known - stored)}; {REGENERATE}"
    assert not stored - known, f"stored vectors the catalogue lost: {sorted(stored - known)}"


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: f"{v.layer}/{v.name}")
def test_encoding_the_value_gives_the_stored_bytes(vector: Vector) -> None:
    stored = _stored(vector)
    encoded = vector.encode(vector.value)
    assert [d.hex() for d in encoded] == [d.hex() for d in stored], \
        f"{vector.layer}/{vector.name}: the encoding changed; {REGENERATE}"


@pytest.mark.parametrize("vector", [v for v in VECTORS if v.decode is not None],
                         ids=lambda v: f"{v.layer}/{v.name}")
def test_decoding_the_stored_bytes_gives_the_value(vector: Vector) -> None:
    assert vector.decode is not None
    assert vector.decode(_stored(vector)) == vector.value


def test_the_file_parser_reads_what_the_writer_wrote() -> None:
    text = "# c\n[a]\n0102 03  # x\n--\n\n[b]\n# nothing\n"
    assert parse_file(text) == {"a": [b"\x01\x02\x03", b""], "b": [b""]}
    for bad in ("0102\n", "[a]\nzz\n", "[a]\n[a]\n"):
        with pytest.raises(ValueError):
            parse_file(bad)


# ------------------------------------------------------------------ completeness
def _datagrams(layer: str) -> list[bytes]:
    return [d for datagrams in STORED[layer].values() for d in datagrams]


def test_every_group_kind_has_a_plain_vector() -> None:
    frames = [d for d in _datagrams("group") if len(d) > gc.HEADER_SIZE]
    covered = {d[11] for d in frames if d[12] == 0}
    missing = sorted(k.name for k in gc.Kind if int(k) not in covered)
    assert not missing, f"group kinds without a golden vector: {missing} (golden_cases.py)"


def test_every_group_kind_of_a_keyed_group_has_a_sealed_vector_for_every_suite() -> None:
    covered = {(d[11], d[gc.HEADER_SIZE + 1]) for d in _datagrams("group_keyed")
               if d[12] & gc.FLAG_AUTH}
    missing = sorted(f"{suite.name}/{kind.name}" for suite in Suite for kind in gc.Kind
                     if int(kind) not in DISCOVERY_KINDS and (int(kind), int(suite)) not in covered)
    assert not missing, f"keyed kinds without a golden vector: {missing} (golden_cases.py)"
    assert set(SUITES) == set(Suite), "a new suite needs its name in golden_cases.SUITES"


def test_discovery_kinds_are_never_sealed() -> None:
    """Discovery is open even for keyed groups (docs/decisions.md): the sealed vectors
    cover every other kind, and a node seals no ADV or GRPS_INFO."""
    assert {int(gc.Kind.ADV), int(gc.Kind.GRPS_INFO)} == set(DISCOVERY_KINDS)


def _infra_tag(frame: bytes) -> int:
    return int(msgpack.unpackb(frame[ic.HEADER_SIZE:], raw=False)[0])


def test_every_infrastructure_tag_has_a_plain_vector() -> None:
    tags = set(ic._SCHEMAS)  # the codec's tag table
    plain = [d for d in _datagrams("infra") if d[:3] == ic.MAGIC]
    covered = {_infra_tag(d) for d in plain}
    missing = sorted(f"{t} {ic._SCHEMAS[t][0].__name__}" for t in tags - covered)
    assert not missing, f"infrastructure messages without a golden vector: {missing}"


def _records(value: Any) -> list[im.Record]:
    if isinstance(value, im.Record):
        return [value]
    if isinstance(value, tuple | list):
        return [r for item in value for r in _records(item)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [r for f in dataclasses.fields(value) for r in _records(getattr(value, f.name))]
    return []


def test_every_record_kind_is_in_an_infrastructure_vector() -> None:
    kinds = {r.kind for v in _by_layer("infra") for r in _records(v.value)}
    assert kinds >= im.RECORD_KINDS, f"record kinds without a vector: {im.RECORD_KINDS - kinds}"


def test_every_suite_seals_an_infrastructure_vector() -> None:
    sealed = [d for d in _datagrams("infra") if d[2] & 0x80]
    suites = {d[4 + d[3] + 1] for d in sealed}
    assert suites == {int(s) for s in Suite}
    assert any(d[3] for d in sealed) and any(not d[3] for d in sealed), \
        "a sealed frame for one receiver and one for any receiver"


def test_m2mp_vectors_cover_the_edges_of_fragmentation() -> None:
    messages = {v.name: (v.value, _stored(v)) for v in _by_layer("m2mp")
                if v.name.startswith("message.")}
    sizes = {len(value[1]): datagrams for value, datagrams in messages.values()}
    assert 0 in sizes and len(sizes[0]) == 1, "the empty message is one packet"
    assert any(n % 500 == 0 and n > 0 for n in sizes), "a message of whole packets"
    assert any(n % 500 and n > 500 for n in sizes), "a message with a short last fragment"
    assert any(len(set(d)) < len(d) for d in sizes.values()), "redundant copies"
