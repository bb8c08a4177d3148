"""Fast constructors for the hot paths (decoding data records, numbering sent
messages, handing messages to the application, M2MP's received messages, opened
sealed frames): the one module that builds objects without their ``__init__``.

A frozen dataclass's ``__init__`` goes through ``object.__setattr__`` field by
field. Two quicker ways build the very same object (same type, equal, same hash):

* a *twin*: a plain class with exactly the same slots, whose instance is filled
  with ordinary attribute stores (the interpreter's fastest) and then turned into
  the dataclass by ``__class__`` assignment, which CPython allows between classes
  of the same layout -- about a third of the ``__init__``'s time;
* failing that (checked once per class, when its constructor is made), setting
  each slot through its descriptor -- about half.

Where the compiled module is in use (m2mc.native), a third way comes first: a builder
in C (``slot_builder``) that allocates the object and fills each slot at the offset its
descriptor names (the class's layout checked first), a fifth of the twin's time.

If a class has no slots at all, its normal constructor is used. A named tuple is
built by ``tuple.__new__`` on the tuple of its fields (:func:`tuple_constructor`),
a quarter of its ``__new__``'s time.

Every builder is generated from the class's fields when it is made, and recorded in
:data:`BUILDERS` with the field names it sets, so a test can check each against the
class's normal constructor (tests/architecture/test_fastobj.py). Keep every such
trick here: code elsewhere calls these builders (``from m2mc.native import
fast_constructor``) and never assigns ``__class__`` or calls ``object.__new__`` itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass
from functools import partial
from typing import Any

from m2mc.native.loader import NATIVE

__all__ = ["BUILDERS", "Builder", "fast_constructor", "tuple_constructor"]


@dataclass(frozen=True, slots=True)
class Builder:
    """A fast builder of ``cls``: ``make`` takes ``names``' values positionally (a named
    tuple's takes one tuple of them)."""

    cls: type[Any]
    make: Callable[..., Any]
    names: tuple[str, ...]
    takes_tuple: bool = False


BUILDERS: dict[type[Any], Builder] = {}
"""Every class a fast builder was made for, with its builder."""


def _field_names(cls: type[Any]) -> list[str]:
    return [f.name for f in fields(cls)] if is_dataclass(cls) else []


def _twin(cls: type[Any], names: list[str]) -> type[Any] | None:
    """A plain class with the slots of ``cls``, if an instance of it can become a
    ``cls`` (same slots, same layout); None if not."""
    if cls.__bases__ != (object,) or tuple(cls.__dict__.get("__slots__", ())) != tuple(names):
        return None
    twin = type(f"_{cls.__name__}Twin", (), {"__slots__": tuple(names)})
    probe = twin()
    for name in names:
        setattr(probe, name, None)
    try:
        probe.__class__ = cls
    except TypeError:  # pragma: no cover - another layout (or interpreter)
        return None
    return twin


def fast_constructor(cls: type[Any]) -> Callable[..., Any]:
    """A positional constructor for a slots dataclass that skips its ``__init__``
    (the class itself if it has no slots), taking every field in order. Its code is
    generated for the class's fields, as dataclasses generate ``__init__``: a loop
    would cost more than the ``__init__`` it replaces."""
    if "__post_init__" in dir(cls):  # a builder that skipped it would build another object
        raise TypeError(f"{cls.__name__} has __post_init__: build it with its constructor")
    names = _field_names(cls)
    if NATIVE is not None:  # in C: the same object, its slots filled at their offsets
        try:
            native: Callable[..., Any] = NATIVE.slot_builder(cls, tuple(names))
        except TypeError:  # (not a plain slots class of exactly these fields)
            pass
        else:
            BUILDERS[cls] = Builder(cls, native, tuple(names))
            return native
    args = ", ".join(f"a{i}" for i in range(len(names)))
    namespace: dict[str, Any] = {"cls": cls}
    twin = _twin(cls, names)
    if twin is not None:
        namespace["twin"] = twin
        body = ["o = twin()", *(f"o.{name} = a{i}" for i, name in enumerate(names)),
                "o.__class__ = cls"]
    else:
        try:
            for i, name in enumerate(names):
                namespace[f"s{i}"] = cls.__dict__[name].__set__
        except (KeyError, AttributeError):  # pragma: no cover - no slots
            BUILDERS[cls] = Builder(cls, cls, tuple(names))
            return cls
        namespace["new"] = object.__new__
        body = ["o = new(cls)", *(f"s{i}(o, a{i})" for i in range(len(names)))]
    source = f"def make({args}):\n" + "".join(f"    {line}\n" for line in body) + "    return o\n"
    exec(source, namespace)
    make: Callable[..., Any] = namespace["make"]
    make.__qualname__ = f"fast_constructor.<{cls.__name__}>"
    BUILDERS[cls] = Builder(cls, make, tuple(names))
    return make


def tuple_constructor(cls: type[Any]) -> Callable[[tuple[Any, ...]], Any]:
    """A named tuple ``cls`` from the tuple of its fields, without its ``__new__``."""
    make = partial(tuple.__new__, cls)
    BUILDERS[cls] = Builder(cls, make, tuple(cls._fields), takes_tuple=True)
    return make
