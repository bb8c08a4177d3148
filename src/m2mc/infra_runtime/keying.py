"""The deployment key of infrastructure mode: where it comes from, and the sealing
object a host or member driver hands its core (docs/security.md, "Infrastructure mode").

Reading a key file and running scrypt are I/O and CPU work the sans-IO cores never
do: the driver resolves the key once, here, and injects an
:class:`~m2mc.infra.wire.InfraWire`.
"""

from __future__ import annotations

import time
from typing import Any

from m2mc.errors import ConfigError
from m2mc.infra.wire import INFRA_KEY_CONTEXT, InfraWire, sealing_auth
from m2mc.security.auth import GroupAuth, counter_start_at
from m2mc.security.keys import GroupKey, GroupSecret

__all__ = ["DeploymentKey", "deployment_auth", "deployment_wire"]


DeploymentKey = GroupKey
"""The deployment key's source: a :class:`~m2mc.security.keys.GroupKey` (exactly one of
``key``, ``key_file``, ``passphrase``; and the ``suite``), resolved for the context
``"m2mc-infra"`` (a passphrase's salt and the subkeys are bound to it)."""


def _resolve(source: Any) -> GroupSecret:
    """The resolved key of a GroupKey, of key text, or of raw key bytes."""
    if isinstance(source, GroupSecret):
        return source
    group_key = source if isinstance(source, GroupKey) else GroupKey.of(source)
    if group_key is None:
        raise ConfigError("deployment key: give key, key_file or passphrase")
    return group_key.resolve(INFRA_KEY_CONTEXT)


def deployment_auth(source: Any, sender: str, counter_start: int | None = None, *,
                    replay_window: int = 1024, max_senders: int = 4096) -> GroupAuth:
    """The sealing object of host or member ``sender`` under deployment key ``source``.

    Its counter starts at ``counter_start``, by default the wall clock in microseconds
    (``counter_start_at(time.time())``), so a restarted process continues above the
    counters it used before and the others' replay windows accept it."""
    start = counter_start_at(time.time()) if counter_start is None else counter_start
    return sealing_auth(_resolve(source), sender, start, replay_window=replay_window,
                        max_senders=max_senders)


def deployment_wire(source: Any | None, sender: str) -> InfraWire:
    """An :class:`InfraWire` for ``sender``: sealed under ``source``, or plain if None."""
    return InfraWire(None if source is None else deployment_auth(source, sender))
