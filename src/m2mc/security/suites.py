"""The authentication suites and their config names (docs/security.md).

Low so that both :mod:`m2mc.security.keys` (which checks a configured suite name)
and :mod:`m2mc.security.auth` (which seals with the suite) can import it.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["SUITE_NAMES", "Suite"]


class Suite(IntEnum):
    HMAC_SHA256 = 1
    AES_256_GCM = 2
    CHACHA20_POLY1305 = 3


SUITE_NAMES: dict[str, Suite] = {
    "hmac-sha256": Suite.HMAC_SHA256,
    "aes-256-gcm": Suite.AES_256_GCM,
    "chacha20-poly1305": Suite.CHACHA20_POLY1305,
}
