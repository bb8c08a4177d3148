"""Infrastructure-mode frames on the wire: plain, or sealed with a deployment key.

A plain frame is :func:`~m2mc.infra.codec.encode`'s ``b"IM\\x01" | CRC-32 | body``.
A deployment with a key seals every frame instead (docs/security.md, "Infrastructure
mode")::

    b"IM\\x81" | L | receiver (L bytes) | auth header (version, suite, key id, sender,
    counter) | body | tag

with :class:`~m2mc.security.auth.GroupAuth`: the prefix is the magic (bit 7 of the
version byte says "sealed") and the receiver, the sender is the host or member id,
the tag (HMAC-SHA256 or an AEAD) covers everything, so the CRC is left out. The
receiver is the host a backbone frame is meant for, or empty for what any receiver
may take (broadcasts; cell frames, whose messages name their gateway or member): a
frame recorded on its way to one host is refused by every other one, whose replay
window never saw its counter. The key's subkeys are bound to
:data:`INFRA_KEY_CONTEXT`, so a group key reused as a deployment key gives unrelated
subkeys.

:class:`InfraWire` is sans-IO: the driver builds the :class:`GroupAuth`
(:func:`m2mc.infra_runtime.keying.deployment_auth`: the key, its own id,
``counter_start_at`` of the wall-clock seconds it read) and the cores call
:meth:`InfraWire.encode` and :meth:`InfraWire.decode`. In a keyed deployment a frame
is accepted only if its tag verifies, its counter is fresh for its sender (replay
window), and the identity the message claims (``host``, ``node``, ``voter``, ...) is
the one that sealed it. Every refusal raises :class:`~m2mc.errors.DecodeError` and
is counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from m2mc.errors import DecodeError
from m2mc.infra import messages as m
from m2mc.infra.codec import HEADER_SIZE, MAGIC, Message, decode, decode_body, encode, encode_body
from m2mc.security.auth import AuthConfig, GroupAuth
from m2mc.security.keys import GroupSecret

__all__ = ["INFRA_KEY_CONTEXT", "SEALED_MAGIC", "InfraWire", "WireStats", "claimed_sender",
           "sealing_auth"]

_MAX_RECEIVER = 64

SEALED_MAGIC = bytes((MAGIC[0], MAGIC[1], MAGIC[2] | 0x80))
INFRA_KEY_CONTEXT = "m2mc-infra"  # what the subkeys (and a passphrase's salt) are bound to

_UPLINK = (m.Hello, m.JoinReq, m.NewReq, m.LeaveReq, m.LeaveOkReq, m.NackReq)
_BY_HOST = (m.Beacon, m.Normals, m.Transfer, m.Ack, m.Move, m.NotMember, m.Status,
            m.TakeoverReject, m.StateReply, m.Forward, m.StabInfo, m.Subscribe,
            m.Unsubscribe, m.Fetch, m.Accepted, m.Reconfig, m.AdminResult, m.RetiredNotice)


# A host's frames to members (cells and replies on the uplink) are numbered in a lane of
# their own (m2mc.security.auth, "lanes"): a member sees them out of sealing order across
# its multicast and unicast sockets, and backbone traffic in between must not make an
# older one look stale.
MEMBER_LANE = 1
_TO_MEMBERS = (m.Beacon, m.Normals, m.Transfer, m.Ack, m.Move, m.NotMember)


def sealing_auth(secret: GroupSecret, sender: str, counter_start: int, *,
                 replay_window: int = 1024, max_senders: int = 4096) -> GroupAuth:
    """The sealing object of host or member ``sender`` under the resolved deployment key
    ``secret``, its counters starting at ``counter_start`` (a driver gives the clock in
    microseconds, so a restarted sender goes on above what it sealed before)."""
    return GroupAuth(INFRA_KEY_CONTEXT, {secret.key_id: secret.key}, sender,
                     config=AuthConfig(secret.suite, replay_window, max_senders),
                     send_key_id=secret.key_id, counter_start=counter_start)


def claimed_sender(msg: Message) -> str | None:
    """The identity a message claims for its sender (None: it names none; such
    messages come from the master, and the host uses the sealed sender as source)."""
    if isinstance(msg, _UPLINK):
        return msg.node
    if isinstance(msg, _BY_HOST):
        return msg.host
    if isinstance(msg, m.Vote):
        return msg.voter
    if isinstance(msg, m.AdminRequest):
        return msg.client
    if isinstance(msg, m.Takeover):
        return msg.master
    if isinstance(msg, m.ElectStart):
        return msg.eid.starter
    return None


@dataclass(slots=True)
class WireStats:
    decoded: int = 0
    malformed: int = 0  # bad magic, checksum, msgpack or fields
    unkeyed_sealed: int = 0  # a sealed frame reached a deployment without a key
    wrong_sender: int = 0  # sealed by one id, claiming to come from another
    misdirected: int = 0  # sealed for another receiver


class InfraWire:
    """Encode and decode frames of one host or member (``auth``: None when unkeyed)."""

    __slots__ = ("_me", "auth", "stats")

    def __init__(self, auth: GroupAuth | None = None) -> None:
        self.auth = auth
        self.stats = WireStats()
        self._me = auth.sender.encode("utf-8") if auth is not None else b""

    @property
    def keyed(self) -> bool:
        return self.auth is not None

    def encode(self, msg: Message, to: str = "") -> bytes:
        """The frame for ``msg``, for receiver ``to`` (a host id; "" for any); sealed
        afresh each time (a new counter), so retransmissions pass replay windows."""
        if self.auth is None:
            return encode(msg)
        receiver = to.encode("utf-8")
        if len(receiver) > _MAX_RECEIVER:
            raise ValueError(f"receiver id longer than {_MAX_RECEIVER} bytes")
        prefix = SEALED_MAGIC + bytes((len(receiver),)) + receiver
        return self.auth.seal(prefix, encode_body(msg),
                              MEMBER_LANE if isinstance(msg, _TO_MEMBERS) else 0)

    def decode(self, data: bytes) -> tuple[Message, str | None]:
        """The message and its authenticated sender (None when unkeyed).

        Raises :class:`DecodeError` (counted here or in ``auth.stats``) for a frame
        that is malformed, unauthenticated in a keyed deployment, sealed in an unkeyed
        one, sealed for another receiver, forged, replayed, or claiming another sender
        than the one that sealed it.
        """
        auth = self.auth
        magic = data[:HEADER_SIZE - 4]
        if magic == SEALED_MAGIC:
            if auth is None:
                self.stats.unkeyed_sealed += 1
                raise DecodeError("sealed infrastructure frame, but this deployment has no key")
            at = len(SEALED_MAGIC)
            end = at + 1 + (data[at] if len(data) > at else 0)
            receiver = data[at + 1:end]
            if receiver and receiver != self._me:
                # Checked before the tag, so a misdirected frame never moves a window.
                self.stats.misdirected += 1
                raise DecodeError("frame sealed for another receiver")
            opened = auth.open(data, end)  # raises, counted in auth.stats
            try:
                msg = decode_body(opened.body)
            except DecodeError:
                self.stats.malformed += 1
                raise
            claim = claimed_sender(msg)
            if claim is not None and claim != opened.sender:
                self.stats.wrong_sender += 1
                raise DecodeError(f"frame sealed by {opened.sender!r} claims {claim!r}")
            self.stats.decoded += 1
            return msg, opened.sender
        if magic == MAGIC and auth is not None:
            auth.unauthenticated()  # raises, counted
        try:
            msg = decode(data)
        except DecodeError:
            self.stats.malformed += 1
            raise
        self.stats.decoded += 1
        return msg, None

    def counters(self) -> dict[str, int]:
        """Everything refused or accepted, for a node's stats."""
        out = {"frames_decoded": self.stats.decoded, "frames_malformed": self.stats.malformed,
               "frames_unkeyed_sealed": self.stats.unkeyed_sealed,
               "frames_wrong_sender": self.stats.wrong_sender,
               "frames_misdirected": self.stats.misdirected}
        if self.auth is not None:
            for name, value in self.auth.stats.as_dict().items():
                out[f"auth_{name}"] = value
        return out
