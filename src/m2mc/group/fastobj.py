"""Fast constructors for the ordering cores' frozen dataclasses, for the hot paths
(decoding data records, numbering sent messages).

A frozen dataclass's ``__init__`` goes through ``object.__setattr__`` field by
field; filling the slots directly builds the very same object (equal, same
hash) in about half the time. If the classes ever stop using slots, the normal
constructors are used instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from m2mc.ordering import Message, MessageId

make_mid: Callable[[str, int], MessageId]
make_message: Callable[[MessageId, MessageId, bytes, Mapping[str, int] | None, int | None],
                       Message]

try:
    _new = object.__new__
    _pid: Any = MessageId.__dict__["pid"].__set__
    _seq: Any = MessageId.__dict__["seq"].__set__
    _mid: Any = Message.__dict__["mid"].__set__
    _parent: Any = Message.__dict__["parent"].__set__
    _payload: Any = Message.__dict__["payload"].__set__
    _vclock: Any = Message.__dict__["vclock"].__set__
    _gseq: Any = Message.__dict__["gseq"].__set__

    def _make_mid(pid: str, seq: int) -> MessageId:
        m = _new(MessageId)
        _pid(m, pid)
        _seq(m, seq)
        return m

    def _make_message(mid: MessageId, parent: MessageId, payload: bytes,
                      vclock: Mapping[str, int] | None, gseq: int | None) -> Message:
        m = _new(Message)
        _mid(m, mid)
        _parent(m, parent)
        _payload(m, payload)
        _vclock(m, vclock)
        _gseq(m, gseq)
        return m

    make_mid = _make_mid
    make_message = _make_message
except (KeyError, AttributeError):  # pragma: no cover - the classes changed shape
    make_mid = MessageId
    make_message = Message


def fast_constructor(cls: type[Any]) -> Callable[..., Any]:
    """A positional constructor for a slots dataclass that fills its slots directly
    (the class's own ``__init__`` if it has no slots)."""
    names = [name for name in getattr(cls, "__dataclass_fields__", {})]
    try:
        setters = [cls.__dict__[name].__set__ for name in names]
    except (KeyError, AttributeError):  # pragma: no cover
        return cls
    new = object.__new__
    if len(setters) == 2:
        s0, s1 = setters

        def make2(a: Any, b: Any) -> Any:
            o = new(cls)
            s0(o, a)
            s1(o, b)
            return o
        return make2

    def make(*values: Any) -> Any:
        o = new(cls)
        for setter, value in zip(setters, values, strict=True):
            setter(o, value)
        return o
    return make
