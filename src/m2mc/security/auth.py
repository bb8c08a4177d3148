"""GroupAuth: seal and open the messages of a keyed group (sans-IO, pure).

A sealed message is ``prefix | auth header | body | tag`` (docs/security.md):

    offset  size  field
    0       1     auth version (1)
    1       1     suite: 1 HMAC-SHA256 tag truncated to 16 bytes (integrity only),
                  2 AES-256-GCM, 3 ChaCha20-Poly1305 (integrity and confidentiality)
    2       1     key id (lets a group roll its key over without a flag day)
    3       1     sender id length L, 1..64
    4       L     sender id, UTF-8
    4+L     8     counter, big-endian, +1 per message the sender seals for this group
                  in one lane: bits 60..62 are the lane (0 for everything but an
                  infrastructure host's frames to members, see below)
    12+L    n     body (ciphertext under an AEAD suite)
    end-16  16    tag

``prefix`` is the caller's cleartext header (the group layer's 13 bytes: magic,
version, group tag, kind, flags). The tag covers prefix, auth header and body,
so no bit of the message can change unnoticed. Subkeys come from the group key
with HKDF-SHA256, bound to the group id, one for the MAC and one for the AEAD:
a key shared by two groups gives unrelated subkeys, and a message of one group
never verifies in another. The AEAD nonce is the first 12 bytes of SHA-256 over
the auth header, unique as long as no (sender, counter) is sealed twice under a
key: ``counter_start`` must never go backwards for a sender id (drivers start
it at the wall clock in microseconds, :func:`counter_start_at`).

After the tag verifies, the sender's counter passes a sliding replay window
(:mod:`m2mc.security.replay`), one per sender and lane. Lanes are for a sender whose
frames take several paths to one receiver: an infrastructure host seals its backbone
frames in lane 0 and what it sends to members in lane 1, so a member, which sees
only lane 1, keeps a window over a stream it sees nearly whole, and a burst of
backbone traffic between a beacon and an acknowledgement that arrive in the other
order (multicast and unicast sockets read in turn) cannot push the older one below
the window (refused as stale). The lane is part of the counter, so it is covered by
the tag: a frame cannot be moved to another lane's window. Every refusal raises a subclass of
:class:`~m2mc.security.errors.AuthError` (a DecodeError) and is counted in
:attr:`GroupAuth.stats`.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, NoReturn

from m2mc.errors import ConfigError
from m2mc.native import tuple_constructor
from m2mc.security.errors import (
    BadTagError,
    MalformedAuthError,
    ReplayError,
    StaleError,
    UnauthenticatedError,
    UnknownKeyError,
)
from m2mc.security.keys import KEY_MAX, KEY_MIN, hkdf_sha256
from m2mc.security.replay import ReplayTable, Verdict
from m2mc.security.suites import SUITE_NAMES, Suite

__all__ = ["AUTH_VERSION", "LANES", "LANE_SHIFT", "TAG_SIZE", "AuthConfig", "AuthStats",
           "GroupAuth", "Opened", "Suite", "counter_start_at", "overhead"]

AUTH_VERSION = 1
TAG_SIZE = 16
MAX_SENDER = 64
MAX_COUNTER = (1 << 64) - 1
LANE_SHIFT = 60
"""A counter's lane is its bits 60..62; the rest counts (a counter_start_at of today, in
microseconds, is under 2**51)."""
LANES = 8
_LANE_UNIT = 1 << LANE_SHIFT
_FIXED_SIZE = 4  # version, suite, key id, sender length
_COUNTER_SIZE = 8
_U64 = struct.Struct(">Q")
_MAC_INFO = b"m2mc-auth-v1 mac\x00"
_ENC_INFO = b"m2mc-auth-v1 enc\x00"
_NONCE_LABEL = b"m2mc-nonce-v1\x00"


def counter_start_at(wall_time: float) -> int:
    """A sender's first counter for a session starting at ``wall_time`` (Unix seconds).

    Microseconds since the epoch: a restarted sender continues above what it
    sent before (unless it sealed over a million messages per second on average),
    so receivers' replay windows accept it and AEAD nonces never repeat.
    """
    return int(wall_time * 1_000_000)


def overhead(sender: str) -> int:
    """Bytes sealing adds to a message of ``sender``."""
    return _FIXED_SIZE + len(sender.encode("utf-8")) + _COUNTER_SIZE + TAG_SIZE


@dataclass(slots=True)
class AuthConfig:
    """Settings of one keyed group; config keys ``suite``, ``replay_window``, ``max_senders``."""

    suite: str = "hmac-sha256"
    replay_window: int = 1024
    max_senders: int = 4096

    def validate(self) -> Suite:
        suite = SUITE_NAMES.get(self.suite)
        if suite is None:
            raise ConfigError(f"unknown auth suite {self.suite!r}; "
                              f"choose one of {', '.join(SUITE_NAMES)}")
        return suite


@dataclass(slots=True)
class AuthStats:
    sealed: int = 0
    opened: int = 0
    malformed: int = 0
    unknown_key: int = 0
    bad_tag: int = 0
    replayed: int = 0
    stale: int = 0
    unauthenticated: int = 0
    sender_evictions: int = 0

    @property
    def rejected(self) -> int:
        return (self.malformed + self.unknown_key + self.bad_tag + self.replayed + self.stale
                + self.unauthenticated)

    def as_dict(self) -> dict[str, int]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["rejected"] = self.rejected
        return out


class Opened(NamedTuple):
    """A message that passed: who sealed it, its counter, and the cleartext body.

    A named tuple rather than a frozen dataclass: one is made per message received,
    and a tuple is built in a quarter of the time."""

    sender: str
    counter: int
    key_id: int
    body: bytes


_make_opened: Callable[[tuple[str, int, int, bytes]], Opened] = tuple_constructor(Opened)


class _Mac:
    """HMAC-SHA256 (RFC 2104) truncated to TAG_SIZE, with the keyed inner and outer
    states computed once: per message it costs two hash copies instead of the four
    key-block compressions and the context set-up of ``hmac.digest`` (2.5x faster)."""

    __slots__ = ("inner", "outer")

    def __init__(self, key: bytes) -> None:
        block = key.ljust(64, b"\0")  # keys here are 32 bytes, below the 64-byte block
        self.inner = hashlib.sha256(bytes(b ^ 0x36 for b in block))
        self.outer = hashlib.sha256(bytes(b ^ 0x5C for b in block))

    def tag(self, data: bytes) -> bytes:
        inner = self.inner.copy()
        inner.update(data)
        outer = self.outer.copy()
        outer.update(inner.digest())
        return outer.digest()[:TAG_SIZE]


@dataclass(frozen=True, slots=True)
class _Key:
    mac: _Mac
    aead: Any  # cryptography's AESGCM / ChaCha20Poly1305, or None for the HMAC suite


class GroupAuth:
    """Authentication (and optionally encryption) of one group's messages by one node.

    ``keys`` maps key id -> group key (or is one key, id 0); ``send_key_id``
    picks the key :meth:`seal` uses. :meth:`open` accepts any key held.
    """

    def __init__(self, group_id: str, keys: bytes | Mapping[int, bytes], sender: str, *,
                 config: AuthConfig | None = None, send_key_id: int = 0,
                 counter_start: int = 0) -> None:
        self.config = config or AuthConfig()
        self.suite = self.config.validate()
        self._suite = int(self.suite)  # a plain int compares faster on the hot path
        keyring = {0: keys} if isinstance(keys, bytes | bytearray) else dict(keys)
        if send_key_id not in keyring:
            raise ConfigError(f"group {group_id!r}: no key with id {send_key_id}")
        sender_bytes = sender.encode("utf-8")
        if not 1 <= len(sender_bytes) <= MAX_SENDER:
            raise ConfigError(f"sender id must be 1 to {MAX_SENDER} bytes of UTF-8")
        if not 0 <= counter_start <= MAX_COUNTER:
            raise ConfigError(f"counter_start out of range: {counter_start}")
        self.group_id = group_id
        self.sender = sender
        self._keys = {key_id: self._subkeys(group_id, key_id, key)
                      for key_id, key in keyring.items()}
        self._send_key = self._keys[send_key_id]
        # Everything of the auth header but the counter is the same for every message sent.
        self._head = (bytes((AUTH_VERSION, self.suite, send_key_id, len(sender_bytes)))
                      + sender_bytes)
        self._next_counter = counter_start
        self._lane_counters: dict[int, int] = {}  # lanes 1..7: their next counter
        self._counter_start = counter_start
        self.replay = ReplayTable(self.config.replay_window, self.config.max_senders)
        self.stats = AuthStats()

    # ----------------------------------------------------------- set-up
    def _subkeys(self, group_id: str, key_id: int, key: bytes) -> _Key:
        if not 0 <= key_id <= 255:
            raise ConfigError(f"key id must be 0..255, got {key_id}")
        if not KEY_MIN <= len(key) <= KEY_MAX:
            raise ConfigError(f"group {group_id!r}: a key must be {KEY_MIN} to {KEY_MAX} bytes")
        gid = group_id.encode("utf-8")
        mac = _Mac(hkdf_sha256(bytes(key), _MAC_INFO + gid))
        if self.suite is Suite.HMAC_SHA256:
            return _Key(mac, None)
        return _Key(mac, _aead(self.suite, hkdf_sha256(bytes(key), _ENC_INFO + gid)))

    @property
    def encrypted(self) -> bool:
        return self.suite is not Suite.HMAC_SHA256

    @property
    def mode(self) -> str:
        """``"encrypted"`` or ``"authenticated"``: what the API and the chat show."""
        return "encrypted" if self.encrypted else "authenticated"

    @property
    def next_counter(self) -> int:
        return self._next_counter

    # ----------------------------------------------------------- sealing
    def seal(self, prefix: bytes, body: bytes, lane: int = 0) -> bytes:
        """The whole message: ``prefix`` then auth header, body (encrypted if so), tag.
        ``lane`` (0..7): the counter stream it is numbered in (see the module's doc)."""
        if lane == 0:
            counter = self._next_counter
            if counter >= _LANE_UNIT:
                raise ConfigError("counter exhausted: this sender must take a new sender id")
            self._next_counter = counter + 1
        else:
            counter = self._lane_counter(lane)
        header = self._head + counter.to_bytes(8, "big")
        key = self._send_key
        self.stats.sealed += 1
        if key.aead is None:
            message = prefix + header + body
            mac = key.mac  # _Mac.tag, inlined: this path runs once per message sent
            inner = mac.inner.copy()
            inner.update(message)
            outer = mac.outer.copy()
            outer.update(inner.digest())
            return message + outer.digest()[:TAG_SIZE]
        aad = prefix + header
        sealed: bytes = key.aead.encrypt(_nonce(header), body, aad)
        return aad + sealed

    def _lane_counter(self, lane: int) -> int:
        if not 0 < lane < LANES:
            raise ConfigError(f"lane must be 0..{LANES - 1}, got {lane}")
        count = self._lane_counters.get(lane, self._counter_start)
        if count >= _LANE_UNIT:
            raise ConfigError("counter exhausted: this sender must take a new sender id")
        self._lane_counters[lane] = count + 1
        return lane << LANE_SHIFT | count

    # ----------------------------------------------------------- opening
    def open(self, message: bytes | memoryview, prefix_size: int) -> Opened:
        """Verify a sealed message whose cleartext prefix is ``prefix_size`` bytes long.

        Returns the sender and body; raises an AuthError subclass (counted) otherwise.
        Only a message whose tag verifies can move the sender's replay window.
        This is on every keyed message's path: the checks that pass are kept to a
        few operations, and the reason of a failure is worked out afterwards.
        """
        data = message if type(message) is bytes else bytes(message)
        fixed_end = prefix_size + _FIXED_SIZE
        header = data[prefix_size:fixed_end]
        if len(header) != _FIXED_SIZE or header[0] != AUTH_VERSION or header[1] != self._suite:
            self._malformed(data, prefix_size)
        key_id = header[2]
        counter_at = fixed_end + header[3]
        body_start = counter_at + _COUNTER_SIZE
        end = len(data) - TAG_SIZE
        key = self._keys.get(key_id)
        if key is None or not 0 < header[3] <= MAX_SENDER or end < body_start:
            self._malformed(data, prefix_size)
        try:
            sender = data[fixed_end:counter_at].decode("utf-8")
        except UnicodeDecodeError:
            self._malformed(data, prefix_size)
        (counter,) = _U64.unpack_from(data, counter_at)
        if key.aead is None:
            mac = key.mac  # _Mac.tag, inlined: this path runs once per message received
            inner = mac.inner.copy()
            inner.update(data[:end])
            outer = mac.outer.copy()
            outer.update(inner.digest())
            if not hmac.compare_digest(outer.digest()[:TAG_SIZE], data[end:]):
                self.stats.bad_tag += 1
                raise BadTagError("authentication tag does not verify")
            body = data[body_start:end]
        else:
            body = self._decrypt(key, data, prefix_size, body_start)
        # A lane of its own for a counter beyond lane 0 (the usual case costs one compare).
        verdict = self.replay.admit(sender if counter < _LANE_UNIT
                                    else f"{sender}\x00{counter >> LANE_SHIFT}", counter)
        if verdict != Verdict.FRESH:
            if verdict != Verdict.EVICTED:
                self._refuse_replay(verdict)
            self.stats.sender_evictions += 1  # accepted, and the table forgot another sender
        self.stats.opened += 1
        return _make_opened((sender, counter, key_id, body))  # Opened(...), 2x faster

    def _malformed(self, data: bytes, prefix_size: int) -> NoReturn:
        """Count and raise the precise reason a message's auth header is unusable."""
        error = self._header_fault(data, prefix_size)
        if isinstance(error, UnknownKeyError):
            self.stats.unknown_key += 1
        else:
            self.stats.malformed += 1
        raise error

    def _header_fault(self, data: bytes, prefix_size: int) -> MalformedAuthError | UnknownKeyError:
        header = data[prefix_size:prefix_size + _FIXED_SIZE]
        if len(header) < _FIXED_SIZE:
            return MalformedAuthError("message too short for its authentication header")
        version, suite, key_id, sender_len = header
        if version != AUTH_VERSION:
            return MalformedAuthError(f"unsupported authentication version {version}")
        if suite != self.suite:
            return MalformedAuthError(f"auth suite {suite} is not this group's ({self.suite})")
        if not 0 < sender_len <= MAX_SENDER or len(data) < (
                prefix_size + _FIXED_SIZE + sender_len + _COUNTER_SIZE + TAG_SIZE):
            return MalformedAuthError("truncated authentication header")
        if key_id not in self._keys:
            return UnknownKeyError(f"no key with id {key_id}")
        return MalformedAuthError("sender id is not UTF-8")

    def _decrypt(self, key: _Key, data: bytes, prefix_size: int, body_start: int) -> bytes:
        from cryptography.exceptions import InvalidTag

        try:
            body: bytes = key.aead.decrypt(_nonce(data[prefix_size:body_start]),
                                           data[body_start:], data[:body_start])
        except InvalidTag:
            self.stats.bad_tag += 1
            raise BadTagError("authentication tag does not verify") from None
        return body

    def _refuse_replay(self, verdict: str) -> NoReturn:
        if verdict == Verdict.STALE:
            self.stats.stale += 1
            raise StaleError("counter below the sender's replay window")
        self.stats.replayed += 1
        raise ReplayError("counter already accepted from this sender")

    def unauthenticated(self) -> NoReturn:
        """Count and raise for a message that reached this keyed group without a tag."""
        self.stats.unauthenticated += 1
        raise UnauthenticatedError("keyed group: message carries no authentication")


def _nonce(header: bytes) -> bytes:
    return hashlib.sha256(_NONCE_LABEL + header).digest()[:12]


def _aead(suite: Suite, key: bytes) -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
    except ImportError:
        raise ConfigError("encrypted groups need the 'cryptography' package: "
                          "pip install 'm2mc[crypto]'") from None
    return AESGCM(key) if suite is Suite.AES_256_GCM else ChaCha20Poly1305(key)
