"""The keys of a group node's keyed groups (docs/security.md): :class:`NodeKeys`.

The keys the application gave (by group id), one GroupAuth per keyed group -- kept
across leave and rejoin: the same sender id must never reuse a seal counter under a
key -- and the GroupAuth of every group instance that is keyed, by group tag
(``by_tag``: what the output side seals with and the receive side opens with; they
share this dict, never copy it). The node decides when a key may change (never
while a member); this object only keeps them.
"""

from __future__ import annotations

from collections.abc import Mapping

from m2mc.group.codec import HEADER_SIZE
from m2mc.group.config import GroupConfig
from m2mc.security.auth import AuthConfig, GroupAuth, overhead
from m2mc.security.keys import GroupSecret
from m2mc.wire.packet import MAX_FRAGMENT


class NodeKeys:
    """The node's group keys and their GroupAuths (module docstring)."""

    def __init__(self, pid: str, config: GroupConfig,
                 keys: Mapping[str, GroupSecret] | None) -> None:
        self.pid = pid
        self.config = config
        self._secrets: dict[str, GroupSecret] = dict(keys or {})
        self._auths: dict[str, GroupAuth] = {}
        self.by_tag: dict[bytes, GroupAuth] = {}

    def secret(self, gid: str) -> GroupSecret | None:
        """The key given for group ``gid``, if any."""
        return self._secrets.get(gid)

    def has(self, gid: str) -> bool:
        """True if a key was given for group ``gid``."""
        return gid in self._secrets

    def set(self, gid: str, secret: GroupSecret | None, counter_start: int) -> None:
        """Give (or with None, take back) the key of ``gid``; its first seal counter is
        ``counter_start``, or past the last one used under the key before."""
        old = self._auths.pop(gid, None)
        if secret is None:
            self._secrets.pop(gid, None)
            return
        self._secrets[gid] = secret
        if old is not None:  # the same sender id must never reuse a counter under a key
            counter_start = max(counter_start, old.next_counter)
        self._auths[gid] = self._new_auth(gid, secret, counter_start)

    def bind(self, gid: str, tag: bytes, counter_start: int) -> GroupAuth | None:
        """A group instance of ``gid`` (``tag``) starts: its GroupAuth if it is keyed."""
        secret = self._secrets.get(gid)
        if secret is None:
            return None
        auth = self._auths.get(gid)
        if auth is None:
            auth = self._auths[gid] = self._new_auth(gid, secret, counter_start)
        self.by_tag[tag] = auth
        return auth

    def unbind(self, tag: bytes) -> None:
        """The group instance of ``tag`` is dropped (its GroupAuth is kept)."""
        self.by_tag.pop(tag, None)

    def auths(self) -> list[GroupAuth]:
        """Every GroupAuth kept, one per keyed group (a left group's too)."""
        return list(self._auths.values())

    def batch_budget(self) -> int:
        """Bytes of records in one batch of a keyed group: sealing adds overhead(pid)
        bytes, and a batch must still fit one M2MP packet. The room is counted exactly
        here (the plain budget keeps a byte or two of slack that, at small payloads,
        would cost a keyed batch one record)."""
        return max(64, min(self.config.batch_bytes, _batch_room(self.pid) - overhead(self.pid)))

    def _new_auth(self, gid: str, secret: GroupSecret, counter_start: int) -> GroupAuth:
        cfg = self.config
        return GroupAuth(gid, {secret.key_id: secret.key}, self.pid,
                         config=AuthConfig(secret.suite, cfg.replay_window, cfg.max_senders),
                         send_key_id=secret.key_id, counter_start=counter_start)


def _batch_room(pid: str) -> int:
    """Bytes of data records that fit one M2MP packet in a DATA message of ``pid``:
    the fragment less the group header, the body's 2-array, the sender string and
    the records array's header (3 bytes: up to 65535 records)."""
    size = len(pid.encode())
    return MAX_FRAGMENT - HEADER_SIZE - 1 - (1 if size < 32 else 2) - size - 3
