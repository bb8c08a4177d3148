"""The narrow ports through which the parts of an infrastructure host see it
(issue 36): :class:`HostSeat` for its succession (:mod:`m2mc.infra.host_succession`)
and :class:`AdminSeat` for its operators' desk (:mod:`m2mc.infra.host_admin`).
:class:`~m2mc.infra.host.HostCore` implements both with its plain attributes and
methods; the parts import these Protocols, never the core, so no part imports its
host back. Sans-IO, like the rest of the host.
"""

from __future__ import annotations

from typing import Protocol

from m2mc.infra import messages as msg
from m2mc.infra.config import InfraConfig
from m2mc.infra.coordinator import Coordinator
from m2mc.infra.directory import Directory
from m2mc.infra.host_stats import HostStats
from m2mc.infra.ids import Epoch
from m2mc.infra.replog import ReplicaLog


class HostSeat(Protocol):
    """What the succession reads and asks of its host."""

    me: str
    cfg: InfraConfig
    log: ReplicaLog
    directory: Directory
    stats: HostStats
    master: str
    epoch: Epoch
    retired: frozenset[str]
    config_lsn: int

    def broadcast(self, m: msg.BackboneMessage) -> None: ...

    def send_to(self, dest: str, m: msg.BackboneMessage) -> None: ...

    def send_status(self, now: float) -> None: ...

    def follow(self, master: str, epoch: Epoch, now: float) -> None: ...

    def lead(self, epoch: Epoch, now: float) -> None: ...

    def install(self, coordinator: Coordinator, now: float) -> None: ...

    def master_alive(self) -> bool: ...

    def check_configuration(self, now: float) -> None: ...

    def emit(self, event: str, now: float, detail: str) -> None: ...

    def notice(self, text: str) -> None: ...


class AdminSeat(Protocol):
    """What the operators' desk reads of its host (all of it read-only: the host
    changes its own configuration and stops itself, through the two calls at the end)."""

    @property
    def me(self) -> str: ...

    @property
    def log(self) -> ReplicaLog: ...

    @property
    def directory(self) -> Directory: ...

    @property
    def stats(self) -> HostStats: ...

    @property
    def coordinator(self) -> Coordinator | None: ...

    @property
    def master(self) -> str: ...

    @property
    def epoch(self) -> Epoch: ...

    @property
    def commit(self) -> int: ...

    @property
    def retired(self) -> frozenset[str]: ...

    @property
    def config_lsn(self) -> int: ...

    @property
    def retired_self(self) -> str: ...

    def send_to(self, dest: str, m: msg.BackboneMessage) -> None: ...

    def master_alive(self) -> bool: ...

    def emit(self, event: str, now: float, detail: str) -> None: ...

    def configure(self, lsn: int, retired: frozenset[str]) -> None:
        """Take the committed configuration of log position ``lsn``."""
        ...

    def stop_serving(self, why: str, now: float) -> None:
        """Stop for good (retired), having sent what the coordinator holds."""
        ...


__all__ = ["AdminSeat", "HostSeat"]
