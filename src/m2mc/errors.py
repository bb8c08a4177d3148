"""Typed errors shared by every layer.

Decoders raise :class:`DecodeError` (never anything else) on bad input; drivers
count and drop. Command-line code turns :class:`UsageError` and
:class:`ConfigError` into a one-line message and exit status 2.
"""

from __future__ import annotations


class M2MCError(Exception):
    """Base class of every error m2mc raises on purpose."""


class DecodeError(M2MCError):
    """Bytes from the network could not be decoded. Count it and drop the input."""


class ConfigError(M2MCError):
    """A configuration file, URL or value is wrong. The message names the culprit."""


class UsageError(M2MCError):
    """The command line or an API call was used wrongly."""


class BufferFullError(M2MCError):
    """A bounded buffer refused an entry; the caller decides what to do next."""


class SavedStateError(ConfigError):
    """State saved in a ``data_dir`` cannot be used safely (unreadable, or it belongs
    to another process). The message says what is wrong and what to do."""


class LogWriteError(M2MCError):
    """A node's durable log could not be written (a full or failing disk): the node
    stopped there, sending nothing its log does not hold (fail-stop); restarted, it
    takes up what its log holds."""
