"""Keyed group frames: the group layer's wire format (src/m2mc/group/codec.py)
sealed and opened with :class:`~m2mc.security.auth.GroupAuth`.

This is the whole integration on the wire, ready for the group manager:

    send:    out = seal_frame(auth, codec.encode(tag, body))      # keyed groups
    receive: auth = keyed group of frame_tag(payload), or None
             frame, sender = open_frame(auth, payload)            # DecodeError: drop
             body = codec.decode_body(frame.kind, frame.body)
             body.sender must equal sender when sender is not None

A sealed frame is the plain frame's 13-byte header with ``FLAG_AUTH`` set, then
the authentication header, the (possibly encrypted) msgpack body and the tag
(docs/security.md). :func:`open_frame` hands :func:`~m2mc.group.codec.split_frame`
the frame as it was before sealing, so the codec's own checks apply unchanged.
"""

from __future__ import annotations

from m2mc.errors import DecodeError
from m2mc.group.codec import FLAG_AUTH, HEADER_SIZE, Frame, split_frame
from m2mc.security.auth import GroupAuth

__all__ = ["frame_tag", "is_sealed", "open_frame", "seal_frame"]

_FLAGS = HEADER_SIZE - 1  # offset of the flags byte
_TAG = slice(3, 11)  # the 8-byte group tag after magic and version


def frame_tag(message: bytes) -> bytes:
    """The group tag of a group frame (to find the group, hence its key), unchecked."""
    return message[_TAG]


def is_sealed(message: bytes) -> bool:
    return len(message) > _FLAGS and bool(message[_FLAGS] & FLAG_AUTH)


def seal_frame(auth: GroupAuth, frame: bytes) -> bytes:
    """The keyed form of a frame made by ``codec.encode``: header flagged, body sealed.

    Seal every transmission afresh (a retransmission too): receivers refuse an
    identical copy as a replay.
    """
    if len(frame) < HEADER_SIZE or frame[_FLAGS] & FLAG_AUTH:
        raise ValueError("not a plain group frame")
    header = frame[:_FLAGS] + bytes((frame[_FLAGS] | FLAG_AUTH,))
    return auth.seal(header, frame[HEADER_SIZE:])


def open_frame(auth: GroupAuth | None, message: bytes) -> tuple[Frame, str | None]:
    """Check a received frame against its group's key (``auth``; None: no key here).

    Returns the frame (body in clear) and the authenticated sender id (None for a
    frame of an unkeyed group). Raises a DecodeError, counted in ``auth.stats``
    where it is an authentication failure, for: a malformed frame; a frame
    without a tag for a keyed group (``UnauthenticatedError``); a sealed frame
    for a group this node holds no key for; any tag, replay or header fault.
    """
    if len(message) < HEADER_SIZE:
        return split_frame(message), None  # raises the codec's "too short"
    flags = message[_FLAGS]
    if not flags & FLAG_AUTH:
        if auth is not None:
            auth.unauthenticated()
        return split_frame(message), None
    if auth is None:
        raise DecodeError("authenticated message for a group this node holds no key for")
    opened = auth.open(message, HEADER_SIZE)
    plain = message[:_FLAGS] + bytes((flags & ~FLAG_AUTH,)) + opened.body
    return split_frame(plain), opened.sender
