"""The deployment key of infrastructure mode: where it comes from, and the sealing
object a host or member driver hands its core (docs/security.md, "Infrastructure mode").

Reading a key file and running scrypt are I/O and CPU work the sans-IO cores never
do: the driver resolves the key once, here, and injects an
:class:`~m2mc.infra.wire.InfraWire`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from m2mc.errors import ConfigError
from m2mc.infra.wire import INFRA_KEY_CONTEXT, InfraWire
from m2mc.security.auth import AuthConfig, GroupAuth, counter_start_at
from m2mc.security.keys import load_group_key

__all__ = ["DeploymentKey", "deployment_auth", "deployment_wire"]


@dataclass(frozen=True, slots=True)
class DeploymentKey:
    """Exactly one of ``key`` (text: ``hex:...``, ``base64:...``, or the raw bytes),
    ``key_file`` (private to its owner, ``chmod 600``) or ``passphrase`` (scrypt, salt
    bound to ``"m2mc-infra"``), and the ``suite``: the fields of a group's key source,
    so a group key source object is accepted wherever this is. Secrets stay out of
    ``repr``."""

    key: str | bytes | None = field(default=None, repr=False)
    key_file: str | os.PathLike[str] | None = None
    passphrase: str | None = field(default=None, repr=False)
    suite: str = "hmac-sha256"

    def __post_init__(self) -> None:
        given = [n for n in ("key", "key_file", "passphrase") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ConfigError("a deployment key needs exactly one of key, key_file, passphrase"
                              + (f" (got {', '.join(given)})" if given else ""))
        AuthConfig(suite=self.suite).validate()


def _resolve(source: Any) -> tuple[bytes, str]:
    """(key, suite) of a DeploymentKey, of any object with the same fields, or of bytes."""
    if isinstance(source, bytes | bytearray):
        return bytes(source), "hmac-sha256"
    raw = getattr(source, "key", None)
    suite = str(getattr(source, "suite", "hmac-sha256"))
    if isinstance(raw, bytes | bytearray):
        return bytes(raw), suite
    key = load_group_key(INFRA_KEY_CONTEXT, key=raw, key_file=getattr(source, "key_file", None),
                         passphrase=getattr(source, "passphrase", None))
    if key is None:
        raise ConfigError("deployment key: give key, key_file or passphrase")
    return key, suite


def deployment_auth(source: Any, sender: str, counter_start: int | None = None, *,
                    replay_window: int = 1024, max_senders: int = 4096) -> GroupAuth:
    """The sealing object of host or member ``sender`` under deployment key ``source``.

    Its counter starts at ``counter_start``, by default the wall clock in microseconds
    (``counter_start_at(time.time())``), so a restarted process continues above the
    counters it used before and the others' replay windows accept it."""
    key, suite = _resolve(source)
    start = counter_start_at(time.time()) if counter_start is None else counter_start
    return GroupAuth(INFRA_KEY_CONTEXT, key, sender,
                     config=AuthConfig(suite, replay_window, max_senders), counter_start=start)


def deployment_wire(source: Any | None, sender: str) -> InfraWire:
    """An :class:`InfraWire` for ``sender``: sealed under ``source``, or plain if None."""
    return InfraWire(None if source is None else deployment_auth(source, sender))
