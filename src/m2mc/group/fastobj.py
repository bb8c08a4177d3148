"""Fast constructors for frozen slots dataclasses, for the hot paths (decoding data
records, numbering sent messages, handing messages to the application).

A frozen dataclass's ``__init__`` goes through ``object.__setattr__`` field by
field. Two quicker ways build the very same object (same type, equal, same hash):

* a *twin*: a plain class with exactly the same slots, whose instance is filled
  with ordinary attribute stores (the interpreter's fastest) and then turned into
  the dataclass by ``__class__`` assignment, which CPython allows between classes
  of the same layout -- about a third of the ``__init__``'s time;
* failing that (checked once per class, when its constructor is made), setting
  each slot through its descriptor -- about half.

If a class has no slots at all, its normal constructor is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from m2mc.ordering import Message, MessageId


def slot_twin(cls: type[Any]) -> type[Any] | None:
    """The twin of slots dataclass ``cls``, for a loop that builds many: ``o = twin()``,
    one store per field, then ``o.__class__ = cls``. None if ``cls`` has none."""
    return _twin(cls, list(getattr(cls, "__dataclass_fields__", {})))


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
    (the class itself if it has no slots). Its code is generated for the class's
    fields, as dataclasses generate ``__init__``: a loop would cost more than the
    ``__init__`` it replaces."""
    names = list(getattr(cls, "__dataclass_fields__", {}))
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
            return cls
        namespace["new"] = object.__new__
        body = ["o = new(cls)", *(f"s{i}(o, a{i})" for i in range(len(names)))]
    source = f"def make({args}):\n" + "".join(f"    {line}\n" for line in body) + "    return o\n"
    exec(source, namespace)
    make: Callable[..., Any] = namespace["make"]
    make.__qualname__ = f"fast_constructor.<{cls.__name__}>"
    return make


make_mid: Callable[[str, int], MessageId] = fast_constructor(MessageId)
make_message: Callable[[MessageId, MessageId, bytes, Mapping[str, int] | None, int | None],
                       Message] = fast_constructor(Message)
