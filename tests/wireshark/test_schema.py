"""The dissector's tables match the Python codecs (no tshark needed).

Every group message kind, every infrastructure message with its fields and their wire
types, the record kinds, the authentication suites and the wire constants: a kind or
field added to a codec without teaching m2mc.lua fails here, naming it. Optional
trailing elements (display names, a GRPS_INFO entry's keyed flag and names) are told
apart by encoding each body with them and without them, and a body that takes a newer
version's elements by decoding it with more (up to the codec's bound, and one past).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import msgpack
import pytest
from samples import (
    BARE_INFOS,
    LUA,
    NAMED_INFOS,
    LuaSpec,
    group_body,
    group_type_token,
    infra_link,
    infra_schema,
    lua_constant,
    lua_fields,
    lua_spec,
    lua_table,
)

from m2mc.errors import DecodeError
from m2mc.group import codec
from m2mc.infra import codec as infra_codec
from m2mc.infra import messages as im
from m2mc.infra import wire as infra_wire
from m2mc.infra_runtime import net
from m2mc.security import auth
from m2mc.transport.url import DEFAULT_CHANNEL_URL, parse_channel_url
from m2mc.wire import packet

GROUP = lua_table("GROUP_KINDS")
INFRA = lua_table("INFRA_TAGS")


def test_every_group_kind_is_known_by_number_and_name() -> None:
    assert {n: row[0] for n, row in GROUP.items()} == {int(k): k.name for k in codec.Kind}


def _wire(body: codec.Body) -> list[Any]:
    wire: list[Any] = msgpack.unpackb(codec.encode(codec.DISCOVERY_TAG, body)[codec.HEADER_SIZE:],
                                      raw=False, strict_map_key=False)
    return wire


def _decodes(kind: int, wire: list[Any]) -> bool:
    try:
        codec.decode_body(kind, msgpack.packb(wire, use_bin_type=True))
    except DecodeError:
        return False
    return True


def _check_extensible(kind: int, wire: list[Any], spec: LuaSpec, where: str,
                      pad: Any = None) -> None:
    """The codec takes a newer version's elements (up to MAX_BODY_ELEMENTS, not one more)
    exactly where the dissector's spec ends in "..."; ``pad(w)`` puts ``w`` in place."""
    put = pad or (lambda w: w)
    extra = [0, "newer", [1, 2], {"k": None}] * codec.MAX_BODY_ELEMENTS
    one_more = wire + extra[:1]
    full = wire + extra[:codec.MAX_BODY_ELEMENTS - len(wire)]
    assert _decodes(kind, put(one_more)) == spec.open, (
        f"{where}: the codec {'takes' if not spec.open else 'refuses'} a further element; "
        f"the dissector's spec {'ends' if spec.open else 'does not end'} in '...'")
    if spec.open:
        assert _decodes(kind, put(full)), f"{where}: {codec.MAX_BODY_ELEMENTS} elements refused"
        assert not _decodes(kind, put([*full, 0])), f"{where}: more than the bound taken"


@pytest.mark.parametrize("kind", list(codec.Kind), ids=lambda k: k.name)
def test_group_body_fields_match_the_codec(kind: codec.Kind) -> None:
    body, bare = group_body(kind), group_body(kind, bare=True)
    spec = lua_spec(GROUP[kind][1])
    fields = spec.fields
    wire = _wire(body)
    assert len(fields) == len(wire), f"{kind.name}: the body has {len(wire)} fields on the wire"
    # the fields a bare body leaves out are the spec's optional trailing ones
    assert len(_wire(bare)) == spec.required, (
        f"{kind.name}: without its optional elements the body has {len(_wire(bare))} fields; "
        f"the dissector requires {spec.required}")
    covered = set()
    for position, (name, token) in enumerate(fields):
        top, _, inner = name.partition(".")
        assert top in {f.name for f in dataclasses.fields(body)}, f"{kind.name}: no field {top}"
        covered.add(top)
        value = getattr(body, top)
        if inner:  # a nested value flattened on the wire: its leaf fields, in order
            value = getattr(value, inner)
            assert token in {"pid", "str", "uint", "bool"}, (kind.name, name, token)
        else:
            allowed = group_type_token(type(body), top)
            assert token in allowed, (f"{kind.name}.{top}: the dissector reads {token!r}, "
                                      f"the codec's type needs one of {sorted(allowed)}")
        if token in {"pid", "str", "name", "uint", "bool"}:
            assert wire[position] == value, f"{kind.name}: field {position} is not {name}"
    assert covered == {f.name for f in dataclasses.fields(body)}, kind.name
    _check_extensible(int(kind), wire, spec, kind.name)


def test_group_info_entries_match_the_codec() -> None:
    """GROUP_INFO, the spec of a GRPS_INFO entry: GrpInfo's fields in wire order, the
    keyed flag and the names optional (written for a keyed or named group only), further
    elements of a newer version taken."""
    spec = lua_spec(lua_constant("GROUP_INFO").strip('"'))
    assert [name for name, _ in spec.fields] == [f.name for f in dataclasses.fields(
        codec.GrpInfo)]
    for name, token in spec.fields:
        allowed = group_type_token(codec.GrpInfo, name)
        assert token in allowed, f"GrpInfo.{name}: {token!r}, not one of {sorted(allowed)}"
    kind = int(codec.Kind.GRPS_INFO)

    def entries(info: codec.GrpInfo) -> list[Any]:
        wire: list[Any] = _wire(codec.GrpsInfo("s", (info,)))[1][0]
        return wire

    named = next(g for g in NAMED_INFOS if g.names)
    assert len(entries(named)) == len(spec.fields)
    assert entries(named)[4:] == [False, dict(named.names)]  # keyed written, as false
    assert [len(entries(g)) for g in BARE_INFOS] == [spec.required] * len(BARE_INFOS), (
        f"an entry neither keyed nor named has {len(entries(BARE_INFOS[0]))} fields; the "
        f"dissector requires {spec.required}")
    keyed = next(g for g in NAMED_INFOS if g.keyed)
    assert len(entries(keyed)) == spec.required + 1 and not keyed.names  # never named
    _check_extensible(kind, entries(named), spec, "a GRPS_INFO entry",
                      pad=lambda entry: ["s", [entry]])


def test_every_infra_message_is_known_with_its_fields_and_wire_types() -> None:
    python = infra_schema()
    assert set(INFRA) == set(python)
    for tag, (cls, fields) in python.items():
        name, link, spec = INFRA[tag]
        assert name == cls.__name__, tag
        assert link == infra_link(cls), cls.__name__
        assert lua_fields(spec) == fields, cls.__name__


def test_record_kinds_suites_and_constants() -> None:
    records = lua_table("INFRA_RECORD_KINDS")
    kinds = {getattr(im, name): name for name in ("APP", "JOINED", "LEFT", "EXPELLED", "CLEANUP",
                                                  "RETIRED", "ADMITTED", "GENESIS", "GJOINED",
                                                  "GLEFT", "NOOP")}
    assert set(kinds) == im.RECORD_KINDS
    assert {n: row[0] for n, row in records.items()} == kinds
    # RETIRED, ADMITTED and GENESIS name a host, not a member
    assert set(lua_table("INFRA_HOST_RECORDS")) == im.HOSTS_ONLY_KINDS
    ops = {getattr(im, f"OP_{name.upper()}"): name for name in ("show", "retire", "readmit")}
    assert set(ops) == im.ADMIN_OPS
    assert {n: row[0] for n, row in lua_table("ADMIN_OPS").items()} == ops
    suites = lua_table("AUTH_SUITES")
    assert {n: row[0] for n, row in suites.items()} == {int(s): name for name, s in
                                                        auth.SUITE_NAMES.items()}
    assert int(lua_constant("AUTH_VERSION")) == auth.AUTH_VERSION
    assert int(lua_constant("AUTH_TAG_SIZE")) == auth.TAG_SIZE
    assert int(lua_constant("MAX_SENDER")) == auth.MAX_SENDER
    assert int(lua_constant("MAX_NAME")) == codec.MAX_NAME
    assert int(lua_constant("MAX_BODY_ELEMENTS")) == codec.MAX_BODY_ELEMENTS
    assert lua_constant("GROUP_MAGIC") == f'"{codec.MAGIC.decode()}"'
    assert int(lua_constant("GROUP_VERSION")) == codec.VERSION
    assert int(lua_constant("GROUP_HEADER")) == codec.HEADER_SIZE
    assert int(lua_constant("GROUP_FLAG_AUTH")) == codec.FLAG_AUTH
    assert lua_constant("INFRA_MAGIC") == '"IM\\1"' and infra_codec.MAGIC == b"IM\x01"
    assert lua_constant("INFRA_SEALED_MAGIC") == '"IM\\129"'
    assert infra_wire.SEALED_MAGIC == b"IM\x81"
    assert int(lua_constant("INFRA_HEADER")) == infra_codec.HEADER_SIZE
    assert int(lua_constant("M2MP_HEADER")) == packet.HEADER_SIZE
    assert int(lua_constant("M2MP_MAX_FRAGMENT")) == packet.MAX_FRAGMENT
    assert int(lua_constant("MAX_PEER_NAME")) == net.MAX_PEER_NAME
    assert lua_constant("MAX_BACKBONE_FRAME") == f"{net.MAX_FRAME >> 20} * 1024 * 1024"
    # plain M2MP is found by port: the default channel's, unless the user says otherwise
    default_port = parse_channel_url(DEFAULT_CHANNEL_URL).port  # type: ignore[union-attr]
    assert f'Pref.range("UDP ports", "{default_port}"' in LUA.read_text(encoding="utf-8")


# Every decoder of network input (m2mc.fuzz_targets.COVERED, which
# tests/security/test_fuzz_short.py keeps complete by scanning the sources): what the
# dissector makes of its input, or why it leaves it alone. A new wire format anywhere
# in the sources fails here until someone decides.
DISSECTED = {
    "m2mc.wire.packet:decode": "m2mp: every packet",
    "m2mc.group.codec:split_frame": "m2mc: the 13-byte header",
    "m2mc.group.codec:decode_body": "m2mc: every kind's body (GROUP_KINDS)",
    "m2mc.group.groupwire:open_frame": "m2mc_auth in sealed group messages",
    "m2mc.infra.codec:decode": "m2mc_infra: plain frames, CRC-32 checked",
    "m2mc.infra.codec:decode_body": "m2mc_infra: every message (INFRA_TAGS)",
    "m2mc.infra.wire:InfraWire.decode": "m2mc_infra: sealed frames, receiver and m2mc_auth",
    "m2mc.infra_runtime.net:FrameReader.feed": "m2mc_backbone: length framing and greeting",
    "m2mc.infra.pieces:Reassembly.feed": "m2mc_infra: pieces put together, the frame decoded "
                                         "in the last (tests/wireshark/test_infra_pieces.py)",
}
NOT_DISSECTED = {
    "m2mc.transport.frames:FrameDecoder.feed": "the daemon's local TCP framing "
                                               "(docs/wireshark.md, Not covered)",
    "m2mc.transport.url_syntax:parse_channel_url": "channel URLs: shown as the strings they are",
    "m2mc.transport.url_syntax:_parse": "channel URLs: shown as the strings they are",
    "m2mc.ordering.ids:MessageId.parse": "message ids are built from the record's fields",
    "m2mc.infra_runtime.net:parse_address": "addresses in messages: shown as strings",
    "m2mc.api.infra_groups:unpack_body": "the application's payload in a record: bytes",
    "m2mc_chat.codec:decode_body": "the chat's payload in a group record: bytes",
    "m2mc.group.stream_codec:decode_descriptor": "a streamed message's head is a record "
                                                 "whose payload (the descriptor) is shown "
                                                 "as bytes; its body's STREAM kinds are "
                                                 "dissected",
    "m2mc.infra.persist:decode_saved": "a member's saved state: a local file, never on the "
                                       "wire",
    "m2mc.infra.codec:_unpack": "a durable host's stored forms: a local file, never on the "
                                "wire",
    "m2mc.infra.codec:unpack_epoch": "a durable host's stored epoch: a local file",
    "m2mc.infra.codec:unpack_record": "a durable host's stored record: a local file (on the "
                                      "wire a record is dissected inside its frame)",
    "m2mc.infra.codec:unpack_snapshot": "a durable host's stored snapshot: a local file (on "
                                        "the wire dissected inside its Sync)",
    "m2mc.infra.state:unpack_groups": "a JOINED record's groups, its body: shown as bytes",
    "m2mc.transport.linkwatch:parse_messages": "the kernel's rtnetlink messages to the "
                                               "interface watcher: never on the network",
    "m2mc.transport.linkwatch:LinkState.feed": "the kernel's rtnetlink messages to the "
                                               "interface watcher: never on the network",
    "m2mc.transport.linkwatch:AddressState.feed": "the kernel's rtnetlink messages to the "
                                                  "interface watcher: never on the network",
}


def test_every_network_decoder_is_dissected_or_left_alone_with_a_reason() -> None:
    from m2mc.fuzz_targets import COVERED

    assert not DISSECTED.keys() & NOT_DISSECTED.keys()
    undecided = sorted(COVERED.keys() - DISSECTED.keys() - NOT_DISSECTED.keys())
    assert not undecided, (f"network decoders the dissector tests say nothing about: "
                           f"{undecided}; teach m2mc.lua or give a reason in NOT_DISSECTED")
    stale = sorted((DISSECTED.keys() | NOT_DISSECTED.keys()) - COVERED.keys())
    assert not stale, f"listed decoders that no longer exist: {stale}"
