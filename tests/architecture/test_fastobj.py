"""The hot paths' fast builders (m2mc.native.fastobj) build exactly what the classes' own
constructors build: the same type, equal, field for field, with every field the
class has. A field added to a class that its builder does not set fails here."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import m2mc.api.message
import m2mc.group.codec
import m2mc.group.events
import m2mc.group.manager
import m2mc.ordering.ids
import m2mc.security.auth
import m2mc.wire.m2mp
from m2mc.native import BUILDERS, Builder, fast_constructor, tuple_constructor

# Every class the hot paths build fast today: a builder that disappears, or a new one,
# shows here (add it to the list, and it is checked below like the others).
EXPECTED = {
    m2mc.ordering.ids.MessageId, m2mc.ordering.ids.Message, m2mc.group.codec.Frame,
    m2mc.group.codec.Data, m2mc.group.codec.Repair, m2mc.group.events.Delivered,
    m2mc.group.events.DeliveredBatch, m2mc.api.message.GroupMessage,
    m2mc.wire.m2mp.MessageReceived, m2mc.security.auth.Opened,
}
VALUES = st.one_of(st.none(), st.integers(), st.text(max_size=6), st.binary(max_size=6),
                   st.lists(st.integers(), max_size=3))


def class_fields(cls: type[Any]) -> tuple[str, ...]:
    if dataclasses.is_dataclass(cls):
        return tuple(f.name for f in dataclasses.fields(cls))
    return tuple(cls._fields)  # a named tuple


def problems(builder: Builder, values: list[Any]) -> list[str]:
    """What differs between ``builder``'s object and the class's own, for ``values``
    (one per field of the class)."""
    cls = builder.cls
    names = class_fields(cls)
    found = []
    if builder.names != names:
        found.append(f"{cls.__name__}: builder sets {builder.names}, the class has {names}")
        return found
    fast = builder.make(tuple(values)) if builder.takes_tuple else builder.make(*values)
    normal = cls(*values)
    if type(fast) is not cls:
        found.append(f"{cls.__name__}: builder made a {type(fast).__name__}")
    for name in names:
        if getattr(fast, name) is not getattr(normal, name):
            found.append(f"{cls.__name__}.{name} differs")
    if fast != normal:
        found.append(f"{cls.__name__}: not equal")
    return found


def test_every_fast_built_class_is_known() -> None:
    assert set(BUILDERS) == EXPECTED


@pytest.mark.parametrize("cls", sorted(EXPECTED, key=lambda c: c.__qualname__),
                         ids=lambda c: c.__qualname__)
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_fast_built_equals_normally_built(cls: type[Any], data: st.DataObject) -> None:
    builder = BUILDERS[cls]
    values = [data.draw(VALUES, label=name) for name in class_fields(cls)]
    assert problems(builder, values) == []


def test_a_field_the_builder_does_not_set_is_caught() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Before:
        a: int
        b: str

    @dataclasses.dataclass(frozen=True, slots=True)
    class After:  # Before with a field added, still paired with Before's builder
        a: int
        b: str
        c: bytes = b""

    stale = Builder(After, fast_constructor(Before), ("a", "b"))
    assert problems(stale, [1, "x", b"y"]) == [
        "After: builder sets ('a', 'b'), the class has ('a', 'b', 'c')"]
    fast_constructor(After)  # a builder made for the class as it is now sets every field
    assert problems(BUILDERS.pop(After), [1, "x", b"y"]) == []
    BUILDERS.pop(Before)


def test_a_named_tuple_builder_and_a_post_init_refusal() -> None:
    class Pair(NamedTuple):
        left: int
        right: str

    make = tuple_constructor(Pair)
    assert make((1, "r")) == Pair(1, "r") and type(make((1, "r"))) is Pair
    assert make((1, "r")).right == "r"
    assert problems(BUILDERS.pop(Pair), [2, "s"]) == []

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            if self.a < 0:
                raise ValueError("negative")

    with pytest.raises(TypeError, match="__post_init__"):
        fast_constructor(Checked)
