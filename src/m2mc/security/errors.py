"""Typed errors of the authentication layer.

Every one is a :class:`~m2mc.errors.DecodeError`: the input came from the
network, the driver counts it and drops it, nothing else happens.
"""

from __future__ import annotations

from m2mc.errors import DecodeError

__all__ = ["AuthError", "BadTagError", "MalformedAuthError", "ReplayError", "StaleError",
           "UnauthenticatedError", "UnknownKeyError"]


class AuthError(DecodeError):
    """A message of a keyed group failed authentication."""


class MalformedAuthError(AuthError):
    """The authentication header is truncated, of an unknown version or suite."""


class UnknownKeyError(AuthError):
    """The message names a key id this node does not hold."""


class BadTagError(AuthError):
    """The tag does not verify: forged, corrupted, or sealed with another key."""


class ReplayError(AuthError):
    """The sender's counter was already accepted (a copy or a replay)."""


class StaleError(ReplayError):
    """The sender's counter lies below its replay window: too old to tell, so refused."""


class UnauthenticatedError(AuthError):
    """A keyed group received a message that carries no authentication at all."""
