"""One sample of every message the codecs define, built from the codecs themselves.

Group bodies are made from their dataclasses' field types and infrastructure messages
from their codec schema (each field's wire type found by probing its decoder), so a
kind added to a codec gets a sample at once, or, if it brings a field type nobody
taught us, fails here with a message saying so. The dissector tests feed these to
tshark (tests/wireshark/test_samples.py) and compare the dissector's schema tables
with them (test_schema.py).

Values differ from field to field (integers count up, strings carry the field name)
so a dissector that swaps two fields is caught. A body with optional trailing elements
(a display name, a GRPS_INFO entry's keyed flag and names) comes twice: with every one
of them, and bare (every field that has a default at its default: no names, nothing
keyed), as an unnamed node of this version or any node of the version before sends it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import re
import typing
from collections.abc import Callable, Iterator
from typing import Any

from m2mc.group import codec
from m2mc.infra import codec as infra_codec
from m2mc.infra import messages as im
from m2mc.kinds import Order
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.wireshark import dissector_path

LUA = dissector_path()


# ------------------------------------------------------------------ the dissector's tables
def lua_table(name: str) -> dict[int, list[str]]:
    """``local NAME = { [n] = { "a", "b", ... }, ... }`` from the dissector, as n -> strings."""
    text = LUA.read_text(encoding="utf-8")
    match = re.search(rf"^local {name} = \{{\n(.*?)^\}}", text, re.S | re.M)
    assert match, f"{name} not found in {LUA}"
    rows = {}
    for line in match.group(1).splitlines():
        row = re.match(r'\s*\[(\d+)\]\s*=\s*(\{.*\}|"[^"]*"),?\s*$', line)
        assert row, f"cannot read this line of {name}: {line!r}"
        rows[int(row.group(1))] = re.findall(r'"([^"]*)"', row.group(2))
    return rows


def lua_constant(name: str) -> str:
    match = re.search(rf"^local {name} = (.+?)(\s+--.*)?$", LUA.read_text(encoding="utf-8"),
                      re.M)
    assert match, f"{name} not found in {LUA}"
    return match.group(1).strip()


def lua_fields(spec: str) -> list[tuple[str, str]]:
    """``"a:pid b:uint? / c:name ..."`` -> [("a", "pid"), ("b", "uint?"), ("c", "name")]."""
    return [tuple(item.split(":", 1)) for item in spec.split()  # type: ignore[misc]
            if item not in ("/", "...")]


@dataclasses.dataclass(frozen=True)
class LuaSpec:
    """A body spec of the dissector: its fields, how many of them every body has (those
    before ``/``; the rest are optional trailing elements), and whether it takes further
    elements of a newer version (a spec ending in ``...``)."""

    fields: list[tuple[str, str]]
    required: int
    open: bool


def lua_spec(spec: str) -> LuaSpec:
    words = spec.split()
    fields = lua_fields(spec)
    required = words.index("/") if "/" in words else len(fields)
    assert "..." not in words or words[-1] == "...", f"'...' ends a spec: {spec!r}"
    return LuaSpec(fields, required, "..." in words)


# ------------------------------------------------------------------ group bodies
_counter = itertools.count(3)

RECORDS = [
    Message(MessageId("alice", 3), ROOT, b"hello"),
    Message(MessageId("bob", 9), MessageId("alice", 3), b"\x00\x01\x02", gseq=12),
    Message(MessageId("carol", 2), MessageId("bob", 9), b"", vclock={"carol": 2, "bob": 9}),
]
ENTRIES: codec.Entries = [(5, MessageId("bob", 9)), (6, codec.MemberEntry("dave", 2, False))]
MEMBERS = (codec.MemberEntry("alice", 1, True), codec.MemberEntry("bob", 2, False))

_GROUP_VALUES: dict[Any, Callable[[str], Any]] = {
    str: lambda name: f"{name.replace('_', '-')}-x",
    int: lambda name: next(_counter),
    bool: lambda name: False,
    bytes: lambda name: b"abc",
    list[Message]: lambda name: list(RECORDS),
    codec.Entries: lambda name: list(ENTRIES),
    codec.Digest: lambda name: {"alice": [(1, 3), (5, 5)], "bob": [(2, 2)]},
    codec.Intervals: lambda name: [(4, 6), (9, 9)],
    dict[str, int]: lambda name: {"alice": 3, "bob": 9},
    tuple[codec.MemberEntry, ...]: lambda name: MEMBERS,
    Order: lambda name: Order.CAUSAL,
    codec.LogState | None: lambda name: codec.LogState(4, "alice", 3, "bob", 17),
    codec.SequencerInfo: lambda name: codec.SequencerInfo(5, "bob", 21),
    tuple[codec.GrpInfo, ...]: lambda name: (
        codec.GrpInfo("team/1", "the team", "total", MEMBERS, keyed=True),
        codec.GrpInfo("open", "", "sb", ())),
}
# A display name of several scripts (UTF-8 of 1 to 3 bytes a character).
NAME = "Zoë ✓ name"
_GROUP_OVERRIDES = {"order": "causal", "desc": "a group's description", "name": NAME,
                    # a STREAM chunk: the last of its body (bare: one more to come)
                    "index": 2, "chunk_bytes": 3, "data": b"abc", "state": 1, "size": 9,
                    "sha256": bytes(range(32))}
# GRPS_INFO entries: keyed (never named), open and named (only its current member
# alice has a name), open and unnamed; bare: none keyed, none named.
NAMED_INFOS = (
    codec.GrpInfo("team/1", "the team", "total", MEMBERS, keyed=True),
    codec.GrpInfo("named", "", "causal", MEMBERS, names=(("alice", "Ålice ✓"),)),
    codec.GrpInfo("open", "", "sb", ()))
BARE_INFOS = tuple(dataclasses.replace(g, keyed=False, names=()) for g in NAMED_INFOS)


def group_body(kind: codec.Kind, *, bare: bool = False) -> codec.Body:
    """A sample body of ``kind`` that the codec encodes and decodes to itself; ``bare``:
    every field that has a default at its default (no optional trailing element)."""
    cls = {k: t for t, k in codec._KIND_OF.items()}[kind]
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if bare and f.default is not dataclasses.MISSING:
            continue
        make = _GROUP_VALUES.get(hints[f.name])
        if make is None:
            raise AssertionError(f"{cls.__name__}.{f.name}: no sample for the field type "
                                 f"{hints[f.name]}; teach the dissector (m2mc.lua) and "
                                 "tests/wireshark/samples.py about it")
        values[f.name] = _GROUP_OVERRIDES.get(f.name) or make(f.name)
        if hints[f.name] == tuple[codec.GrpInfo, ...]:
            values[f.name] = BARE_INFOS if bare else NAMED_INFOS
    body = cls(**values)
    frame = codec.split_frame(codec.encode(codec.group_tag("g"), body))
    assert codec.decode_body(frame.kind, frame.body) == body, cls.__name__
    return body


def group_bodies() -> Iterator[tuple[codec.Kind, codec.Body]]:
    """Every kind's sample, and its bare sample where that is another body."""
    for kind in codec.Kind:
        full, bare = group_body(kind), group_body(kind, bare=True)
        yield kind, full
        if bare != full:
            yield kind, bare


def group_type_token(cls: type, name: str) -> set[str]:
    """The dissector types a body field of this Python type may have (a string field
    called ``name`` is a display name, bounded and checked as one)."""
    hint = typing.get_type_hints(cls)[name]
    if hint is str and name == "name":
        return {"name"}
    tokens = {str: {"pid", "str"}, int: {"uint"}, bool: {"bool"}, bytes: {"bin"},
              list[Message]: {"records"},
              codec.Entries: {"entries"}, codec.Digest: {"digest"},
              codec.Intervals: {"intervals"}, dict[str, int]: {"summary"},
              tuple[codec.MemberEntry, ...]: {"members"},
              codec.LogState | None: {"logstate?"}, tuple[codec.GrpInfo, ...]: {"grpinfos"},
              tuple[tuple[str, str], ...]: {"names"},
              Order: {"str"}}  # a group's order: its string on the wire
    return tokens.get(hint, set())


# ------------------------------------------------------------------ infrastructure messages
_MID = ["m0", 0x1234ABCD]
_EPOCH = [4, 1700000000.25, "H2"]
_CELL = ["H1", "udp-multicast://239.255.20.1:7711?iface=127.0.0.1&ttl=1", "127.0.0.1:7301", 2]
_RECORD = [7, 5, 0, "m0", 0x1234ABCD, 3, 2, 1, b"payload", "lunch", 4]
# One wire sample per token; a codec is of the one token whose sample it decodes and
# encodes back unchanged (None: the optional form).
WIRE_SAMPLES: dict[str, Any] = {
    "int": 7, "str": "x", "bool": True, "bytes": b"x",
    "mid": _MID, "epoch": _EPOCH, "cell": _CELL,
    "records": [_RECORD, [8, 0, 1, "m1", 2, 0, 0, 0, b"", "", 0],
                [9, 0, 5, "H3", 0, 0, 0, 0, b"", "", 0],
                [10, 6, 8, "m1", 2, 1, 3, 0, b"", "tea", 0]],
    "cells": [_CELL], "mids": [_MID, ["m1", 2]],
    "items": [[3, 2, b"body", "lunch", 0], [4, 3, b"", "tea", 8]],
    "pairs": [[_MID, 11]], "strs": ["H1", "H2"],
    "opt_snapshot": [9, 6, 5, [[_MID, 1, 4, 3, True, 2]], [["m1", 2]], ["H3", "H4"], 8, 77,
                     [["lunch", 4, [_MID]], ["tea", 0, []]]],
    "request": [12, "m0", "H1", 4, _MID, [[3, 2, b"body", "lunch", 0]]],
}


def infra_token(enc: Callable[[Any], Any], dec: Callable[[Any], Any], where: str) -> str:
    """The wire type of one field codec of ``m2mc.infra.codec._SCHEMAS``, by probing."""
    optional = False
    with contextlib.suppress(Exception):  # a decoder refusing None is the answer
        optional = dec(None) is None
    found = []
    for token, sample in WIRE_SAMPLES.items():
        try:
            if enc(dec(sample)) == sample:
                found.append(token)
        except Exception:  # not this token
            continue
    if len(found) != 1:
        raise AssertionError(f"{where}: cannot tell the wire type of this field (matches "
                             f"{found or 'no known type'}); teach the dissector (m2mc.lua) "
                             "and tests/wireshark/samples.py about it")
    token = found[0]
    if optional and token in ("mid", "epoch"):
        return "opt_" + token
    return token


@functools.cache
def infra_schema() -> dict[int, tuple[type, list[tuple[str, str]]]]:
    """tag -> (class, [(field, token), ...]) from the Python codec."""
    out = {}
    for tag, (cls, codecs) in infra_codec._SCHEMAS.items():
        names = list(cls.__slots__)
        out[tag] = (cls, [(name, infra_token(enc, dec, f"{cls.__name__}.{name}"))
                          for name, (enc, dec) in zip(names, codecs, strict=True)])
    return out


def infra_link(cls: type) -> str:
    for link, union in (("downlink", im.DownlinkMessage), ("uplink", im.UplinkMessage),
                        ("backbone", im.BackboneMessage)):
        if cls in typing.get_args(union):
            return link
    raise AssertionError(f"{cls.__name__} is in none of the three message families")


def infra_message(tag: int) -> Any:
    """A sample message of ``tag``, its fields decoded from WIRE_SAMPLES."""
    cls, codecs = infra_codec._SCHEMAS[tag]
    values = []
    for index, ((name, token), (_, dec)) in enumerate(
            zip(infra_schema()[tag][1], codecs, strict=True)):
        base = token if token in WIRE_SAMPLES else token.removeprefix("opt_")
        if base == "int" and name == "op":
            values.append(index % len(im.ADMIN_OPS))  # an operation the dissector names
        elif base == "int":
            values.append(20 + index)  # a different number in every field
        elif base == "str":
            values.append(f"{name}-v")
        elif base == "bool":
            values.append(index % 2 == 0)
        else:
            values.append(dec(WIRE_SAMPLES[base]))
    msg = cls(*values)
    assert infra_codec.decode(infra_codec.encode(msg)) == msg
    return msg


def infra_messages() -> Iterator[tuple[int, Any]]:
    for tag in infra_codec._SCHEMAS:
        yield tag, infra_message(tag)

