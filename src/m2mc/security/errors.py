"""Typed errors of the authentication layer.

Every :class:`AuthError` is a :class:`~m2mc.errors.DecodeError`: the input came
from the network, the driver counts it and drops it, nothing else happens.
:class:`KeyRequiredError` is the one usage error: the application asked for
something only a key holder can do.
"""

from __future__ import annotations

from m2mc.errors import DecodeError, UsageError

__all__ = ["AuthError", "BadTagError", "KeyRequiredError", "MalformedAuthError", "ReplayError",
           "StaleError", "UnauthenticatedError", "UnknownKeyError"]


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


class KeyRequiredError(UsageError):
    """An API call needs a group key this node was not given: joining a group that is
    known to be keyed (discovered as such, or keyed in this node's durable log)."""
