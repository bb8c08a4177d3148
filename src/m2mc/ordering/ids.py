"""Message identities and the message record every ordering core consumes.

A message identity is ``<pid, seqno>`` (seeds/003 IV.B.1; seeds/000 IV.C.1): the
sender's unique id and its per-sender sequence counter, starting at 1. ``ROOT``
is the virtual Ordering Tree Root (OTR): the parent of every message that
answers nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from m2mc.errors import DecodeError
from m2mc.native import bind_message_classes, fast_constructor

__all__ = ["ROOT", "Message", "MessageId"]


@dataclass(frozen=True, slots=True, order=True)
class MessageId:
    """``<pid, seqno>``. ``str(mid)`` is ``"pid:seq"``; ``str(ROOT)`` is ``""``."""

    pid: str
    seq: int

    def __str__(self) -> str:
        if not self.pid and self.seq == 0:
            return ""
        return f"{self.pid}:{self.seq}"

    @property
    def is_root(self) -> bool:
        return self.seq == 0 and not self.pid

    @staticmethod
    def parse(text: str) -> MessageId:
        """Inverse of ``str``: ``"pid:seq"`` -> ``MessageId``; ``""`` -> ``ROOT``.

        The pid may itself contain ``:``; the last one separates the seqno.
        Raises :class:`~m2mc.errors.DecodeError` on anything else.
        """
        if text == "":
            return ROOT
        pid, sep, seq_text = text.rpartition(":")
        if not sep or not pid or not seq_text.isdigit() or not seq_text.isascii():
            raise DecodeError(f"not a message id 'pid:seq': {text!r}")
        seq = int(seq_text)
        if seq < 1:
            raise DecodeError(f"message id sequence number must be >= 1: {text!r}")
        return MessageId(pid, seq)


ROOT = MessageId("", 0)
"""The Ordering Tree Root (OTR): semantically before every message (seeds/003 III)."""


@dataclass(frozen=True, slots=True)
class Message:
    """What the ordering cores order: ``<mid_c, mid_p, data>`` (seeds/003 IV.B.2).

    ``vclock`` is used by :class:`~m2mc.ordering.causal.CausalOrder` (pid -> count,
    ``vclock[mid.pid] == mid.seq``); ``gseq`` by :class:`~m2mc.ordering.total.TotalOrder`
    (the global sequence number the group layer's sequencing log gave it).
    The vclock takes no part in hashing so a message with a dict vclock stays hashable.
    """

    mid: MessageId
    parent: MessageId = ROOT
    payload: bytes = b""
    vclock: Mapping[str, int] | None = field(default=None, hash=False)
    gseq: int | None = None


# The hot paths' constructors (m2mc.fastobj): numbering sent messages, decoding records.
make_mid: Callable[[str, int], MessageId] = fast_constructor(MessageId)
make_message: Callable[[MessageId, MessageId, bytes, Mapping[str, int] | None, int | None],
                       Message] = fast_constructor(Message)

# The compiled loops over messages build and read these classes (m2mc.native).
bind_message_classes(MessageId, Message, ROOT)
