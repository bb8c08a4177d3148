"""Where a group key comes from: a key written in the config, a key file, or a passphrase.

- ``key``: the key itself as text, ``hex:...``/``base64:...`` or bare hex/base64;
  16 to 64 bytes once decoded (32 recommended: ``m2mc``-generated keys are 32).
- ``key_file``: a file holding that text, or the raw key bytes. Like an ssh
  private key it must not be readable by group or others (``chmod 600``).
- ``passphrase``: stretched with scrypt (N=2^15, r=8, p=1, 32 bytes; about 32 MiB
  and 0.1 s once per passphrase and group, then cached). The salt is
  ``b"m2mc-group-key-v1\\0" + group id``: every member derives the same key with
  no extra exchange, and the same passphrase gives unrelated keys for two groups.
  The salt is public and fixed per group, so an attacker can start a dictionary
  attack on one group before seeing traffic; choose a long passphrase, or a raw key.

:class:`GroupKey` is how an application names a group's key source (and suite);
:meth:`GroupKey.resolve` reads or derives it into a :class:`GroupSecret`, the
resolved key the sans-IO group layer takes (it never reads files itself).
:func:`hkdf_sha256` (RFC 5869) derives the subkeys used on the wire.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import stat
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from m2mc.errors import ConfigError
from m2mc.security.suites import SUITE_NAMES

__all__ = ["DEFAULT_SUITE", "KEY_MAX", "KEY_MIN", "GroupKey", "GroupSecret",
           "derive_passphrase_key", "generate_key", "hkdf_sha256", "key_from_file",
           "load_group_key", "parse_key"]

KEY_MIN = 16
KEY_MAX = 64
SCRYPT_N = 1 << 15
SCRYPT_R = 8
SCRYPT_P = 1
SCRYPT_MAXMEM = 64 * 1024 * 1024
PASSPHRASE_SALT_PREFIX = b"m2mc-group-key-v1\x00"
_CACHE_SIZE = 64
DEFAULT_SUITE = "hmac-sha256"

# (sha256 of passphrase, group id, n, r, p) -> derived key; bounded LRU.
_derived: OrderedDict[tuple[bytes, str, int, int, int], bytes] = OrderedDict()
derivations = 0  # how many times scrypt actually ran (tests check the cache with it)


def hkdf_sha256(key: bytes, info: bytes, length: int = 32, salt: bytes = b"") -> bytes:
    """HKDF-SHA256 (RFC 5869): extract with ``salt``, expand with ``info``."""
    if length > 255 * 32:
        raise ValueError("HKDF output too long")
    prk = hmac.digest(salt or bytes(32), key, "sha256")
    out = b""
    block = b""
    counter = 1
    while len(out) < length:
        block = hmac.digest(prk, block + info + bytes([counter]), "sha256")
        out += block
        counter += 1
    return out[:length]


def generate_key() -> str:
    """A fresh random 32-byte key, as the ``hex:`` text a config file takes."""
    return "hex:" + os.urandom(32).hex()


def parse_key(text: str, where: str = "key") -> bytes:
    """Decode key text: ``hex:``/``base64:`` prefixed, or bare hex, or bare base64."""
    text = text.strip()
    kind, sep, rest = text.partition(":")
    try:
        if sep and kind == "hex":
            key = bytes.fromhex(rest)
        elif sep and kind == "base64":
            key = base64.b64decode(rest, validate=True)
        elif all(c in "0123456789abcdefABCDEF" for c in text) and len(text) % 2 == 0:
            key = bytes.fromhex(text)
        else:
            key = base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        raise ConfigError(f"{where}: not a hex or base64 key") from None
    if not KEY_MIN <= len(key) <= KEY_MAX:
        raise ConfigError(f"{where}: a key must be {KEY_MIN} to {KEY_MAX} bytes, "
                          f"got {len(key)}")
    return key


def key_from_file(path: str | os.PathLike[str]) -> bytes:
    """Read a key file: key text (as :func:`parse_key`) or exactly the raw key bytes."""
    file = Path(path).expanduser()
    try:
        mode = file.stat().st_mode
        data = file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"key file {file}: {exc.strerror or exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(f"key file {file} is accessible by group or others; "
                          f"run: chmod 600 {file}")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.strip():
        try:
            return parse_key(text, f"key file {file}")
        except ConfigError:
            if not KEY_MIN <= len(data) <= KEY_MAX:
                raise
    if not KEY_MIN <= len(data) <= KEY_MAX:
        raise ConfigError(f"key file {file}: a raw key must be {KEY_MIN} to {KEY_MAX} bytes, "
                          f"got {len(data)}")
    return data


def derive_passphrase_key(passphrase: str, group_id: str, *, n: int = SCRYPT_N,
                          r: int = SCRYPT_R, p: int = SCRYPT_P) -> bytes:
    """The 32-byte key of ``group_id`` for ``passphrase`` (scrypt, cached)."""
    global derivations
    if not passphrase:
        raise ConfigError("passphrase must not be empty")
    secret = passphrase.encode("utf-8")
    cache_key = (hashlib.sha256(secret).digest(), group_id, n, r, p)
    key = _derived.get(cache_key)
    if key is not None:
        _derived.move_to_end(cache_key)
        return key
    try:
        key = hashlib.scrypt(secret, salt=PASSPHRASE_SALT_PREFIX + group_id.encode("utf-8"),
                             n=n, r=r, p=p, maxmem=SCRYPT_MAXMEM, dklen=32)
    except ValueError as exc:
        raise ConfigError(f"passphrase key derivation: {exc}") from None
    derivations += 1
    _derived[cache_key] = key
    while len(_derived) > _CACHE_SIZE:
        _derived.popitem(last=False)
    return key


def load_group_key(group_id: str, *, key: str | None = None,
                   key_file: str | os.PathLike[str] | None = None,
                   passphrase: str | None = None) -> bytes | None:
    """The key of a group from at most one source; None for an unauthenticated group."""
    given = [name for name, value in (("key", key), ("key_file", key_file),
                                      ("passphrase", passphrase)) if value is not None]
    if len(given) > 1:
        raise ConfigError(f"group {group_id!r}: give only one of key, key_file, passphrase "
                          f"(got {', '.join(given)})")
    if key is not None:
        return parse_key(key, f"group {group_id!r} key")
    if key_file is not None:
        return key_from_file(key_file)
    if passphrase is not None:
        return derive_passphrase_key(passphrase, group_id)
    return None


def _check_suite(suite: str) -> None:
    if suite not in SUITE_NAMES:
        raise ConfigError(f"unknown auth suite {suite!r}; choose one of {', '.join(SUITE_NAMES)}")


@dataclass(frozen=True, slots=True)
class GroupSecret:
    """A group's resolved key, what :class:`~m2mc.group.manager.GroupNode` takes.

    ``key``: 16 to 64 bytes; ``suite``: ``hmac-sha256`` (integrity),
    ``aes-256-gcm`` or ``chacha20-poly1305`` (integrity and secrecy); ``key_id``
    (0..255) is written in every sealed message, so a group can roll its key over.
    The key is left out of ``repr`` so it never ends up in a log line.
    """

    key: bytes = field(repr=False)
    suite: str = DEFAULT_SUITE
    key_id: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.key, bytes) or not KEY_MIN <= len(self.key) <= KEY_MAX:
            raise ConfigError(f"a group key must be {KEY_MIN} to {KEY_MAX} bytes")
        if not 0 <= self.key_id <= 255:
            raise ConfigError(f"key id must be 0..255, got {self.key_id}")
        _check_suite(self.suite)


@dataclass(frozen=True, slots=True)
class GroupKey:
    """Where a group's key comes from: exactly one of ``key`` (text as
    :func:`parse_key` takes it, or the raw key bytes), ``key_file`` or
    ``passphrase``; and the ``suite``. Secrets are left out of ``repr``.

    >>> GroupKey(passphrase="correct horse battery staple")   # doctest: +SKIP
    >>> GroupKey(key_file="~/.m2mc/team.key", suite="aes-256-gcm")  # doctest: +SKIP
    """

    key: str | bytes | None = field(default=None, repr=False)
    key_file: str | os.PathLike[str] | None = None
    passphrase: str | None = field(default=None, repr=False)
    suite: str = DEFAULT_SUITE

    def __post_init__(self) -> None:
        given = [name for name in ("key", "key_file", "passphrase")
                 if getattr(self, name) is not None]
        if len(given) != 1:
            raise ConfigError("a group key needs exactly one of key, key_file, passphrase"
                              + (f" (got {', '.join(given)})" if given else ""))
        _check_suite(self.suite)
        if isinstance(self.key, bytes) and not KEY_MIN <= len(self.key) <= KEY_MAX:
            raise ConfigError(f"a group key must be {KEY_MIN} to {KEY_MAX} bytes")
        if isinstance(self.key, str):
            parse_key(self.key)  # a typo shows at once, not at the first join
        elif self.key is not None and not isinstance(self.key, bytes):
            raise ConfigError(f"key must be text or bytes, got {type(self.key).__name__}")

    @classmethod
    def of(cls, key: GroupKey | str | bytes | None = None, *,
           key_file: str | os.PathLike[str] | None = None, passphrase: str | None = None,
           suite: str | None = None) -> GroupKey | None:
        """The key source named by an API call's keyword arguments (None: no key).

        ``key`` may already be a GroupKey; then no other argument may be given."""
        if isinstance(key, GroupKey):
            if key_file is not None or passphrase is not None or suite is not None:
                raise ConfigError("give either a GroupKey or key_file/passphrase/suite, "
                                  "not both")
            return key
        if key is None and key_file is None and passphrase is None:
            if suite is not None:
                raise ConfigError("suite given without a key, key_file or passphrase")
            return None
        return cls(key, key_file, passphrase, suite or DEFAULT_SUITE)

    def resolve(self, group_id: str) -> GroupSecret:
        """Read or derive the key of ``group_id`` (a passphrase key depends on it).
        Reads the key file, or runs scrypt once per (passphrase, group) per process."""
        if isinstance(self.key, bytes):
            return GroupSecret(self.key, self.suite)
        text = self.key if isinstance(self.key, str) else None
        key = load_group_key(group_id, key=text, key_file=self.key_file,
                             passphrase=self.passphrase)
        assert key is not None  # __post_init__: exactly one source
        return GroupSecret(key, self.suite)
