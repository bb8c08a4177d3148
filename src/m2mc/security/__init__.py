"""Authenticated groups and bounded control traffic (docs/security.md).

Pure building blocks the group and infrastructure layers use: key sources
(:mod:`~m2mc.security.keys`), :class:`GroupAuth` (seal/open with an HMAC or
AEAD tag and a replay window), and :class:`RateLimiter` (per-sender token
buckets). No sockets, clocks or threads; reading a key file is the only I/O.
"""

from m2mc.security.auth import (
    AUTH_VERSION,
    TAG_SIZE,
    AuthConfig,
    AuthStats,
    GroupAuth,
    Opened,
    Suite,
    counter_start_at,
    overhead,
)
from m2mc.security.errors import (
    AuthError,
    BadTagError,
    KeyRequiredError,
    MalformedAuthError,
    ReplayError,
    StaleError,
    UnauthenticatedError,
    UnknownKeyError,
)
from m2mc.security.keys import (
    GroupKey,
    GroupSecret,
    derive_passphrase_key,
    generate_key,
    hkdf_sha256,
    key_from_file,
    load_group_key,
    parse_key,
)
from m2mc.security.ratelimit import RateLimitConfig, RateLimiter
from m2mc.security.replay import ReplayTable

__all__ = [
    "AUTH_VERSION", "TAG_SIZE", "AuthConfig", "AuthError", "AuthStats", "BadTagError",
    "GroupAuth", "GroupKey", "GroupSecret", "KeyRequiredError", "MalformedAuthError", "Opened",
    "RateLimitConfig", "RateLimiter",
    "ReplayError", "ReplayTable", "StaleError", "Suite", "UnauthenticatedError",
    "UnknownKeyError", "counter_start_at", "derive_passphrase_key", "generate_key",
    "hkdf_sha256", "key_from_file", "load_group_key", "overhead", "parse_key",
]
