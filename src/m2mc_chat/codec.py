"""The chat payload carried inside a group message.

The group layer carries the message identity and the message it answers; the
chat adds only who wrote it and what: a UTF-8 JSON object
``{"nick": str, "text": str, "ts": float}`` (``ts``, the sender's clock, orders
siblings on screen). JSON rather than msgpack so a human can read a captured
packet; the body is small either way.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from m2mc.errors import DecodeError, UsageError

__all__ = ["MAX_NICK", "MAX_TEXT", "ChatBody", "clean_nick", "decode_body", "encode_body",
           "validate_nick"]

MAX_NICK = 32
"""Characters in a nick."""
MAX_TEXT = 4000
"""Characters in one message: about a screenful, and a few M2MP packets at most."""


@dataclass(frozen=True, slots=True)
class ChatBody:
    nick: str
    text: str
    ts: float


def validate_nick(nick: str) -> str:
    """Strip ``nick`` and check it; raises :class:`UsageError` with the reason."""
    nick = nick.strip()
    if not nick:
        raise UsageError("the nick must not be empty")
    if len(nick) > MAX_NICK:
        raise UsageError(f"the nick is longer than {MAX_NICK} characters")
    if any(not ch.isprintable() for ch in nick):
        raise UsageError("the nick may only hold printable characters")
    return nick


def clean_nick(name: str) -> str:
    """A nick announced by the group layer (a member's display name, which any process
    can set) as the chat shows it: stripped, or ``""`` when it is not a nick the chat
    would accept (empty, too long, unprintable characters)."""
    try:
        return validate_nick(name)
    except UsageError:
        return ""


def encode_body(nick: str, text: str, ts: float) -> bytes:
    if not text.strip():
        raise UsageError("a message needs some text")
    if len(text) > MAX_TEXT:
        raise UsageError(f"a message holds at most {MAX_TEXT} characters, this has {len(text)}")
    body = {"nick": validate_nick(nick), "text": text, "ts": float(ts)}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def decode_body(data: bytes) -> ChatBody:
    """Inverse of :func:`encode_body`; raises :class:`DecodeError` on anything else."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise DecodeError(f"chat payload is not UTF-8 JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise DecodeError("chat payload is not a JSON object")
    nick, text, ts = obj.get("nick"), obj.get("text"), obj.get("ts", 0.0)
    if not isinstance(nick, str) or not isinstance(text, str):
        raise DecodeError("chat payload needs string fields 'nick' and 'text'")
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
        raise DecodeError("chat payload field 'ts' must be a finite number")
    if len(nick) > MAX_NICK or len(text) > MAX_TEXT:
        raise DecodeError("chat payload nick or text is too long")
    return ChatBody(nick=nick, text=text, ts=float(ts))
