"""Settings of infrastructure mode: timers (seconds), bounds, and the switches of
the seeds/001 section 4 extensions. One :class:`InfraConfig` is shared by hosts
and members of a deployment; :meth:`InfraConfig.check` validates it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from m2mc.errors import ConfigError
from m2mc.infra.pieces import MIN_CELL_MTU
from m2mc.infra.state import GROUP_TABLE_LIMIT

MAX_CELL_MTU = 65_535  # an IPv4 packet's largest size
# What a cell frame holds beside its records: the frame's header, the names of host,
# member and group, a seal (docs/decisions.md, "Infrastructure mode carries messages
# of at most 65,000 bytes": under 500 bytes with names of 200). A batch stops this
# much short of a packet: one with longer names takes a second piece, nothing worse.
FRAME_ENVELOPE = 300

# A message travels whole in one datagram, from its member to the host and from the
# host to the cell: 65,507 bytes of UDP payload less its envelope (frame header, names
# of member, host and group up to 200 bytes, a seal), measured under 500 bytes. Above
# this a send never left the member (docs/decisions.md, "Infrastructure mode carries
# messages of at most 65,000 bytes").
MAX_PAYLOAD_LIMIT = 65_000


@dataclass(frozen=True, slots=True)
class InfraConfig:
    # ------------------------------------------------ seeds/001 section 4 extensions
    subscribe: bool = False  # 4.1: NORMALs only to gateways with members (plus replicas)
    member_buffer: int = 4096  # 4.2: mybuf capacity (0 = no buffering at all)
    skip_membership: bool = False  # 4.3: cells relay only their own membership changes
    # ------------------------------------------------ cell (seeds/001 2.3, 2.4, 3.3)
    beacon_interval: float = 0.1  # T_B
    local_timeout: float = 0.35  # a computer silent this long leaves `local` (B2)
    retransmit: float = 0.08  # A1: resend an unacknowledged frame after this
    uplink_window: int = 8  # member: NEW frames outstanding together (A1: 1)
    nack_timer: float = 0.15  # figure 6: no further NACK while this timer runs
    confirm_timeout: float = 2.0  # resend own NEWs not seen sequenced after this
    host_silence: float = 0.6  # member: no beacon this long -> its host is gone
    transfer_chunk: int = 64  # records per TRANSFER datagram burst step
    max_datagram: int = 8192  # bytes of one cell datagram (batches stop here)
    max_payload: int = 60000  # largest application message
    max_pending_sends: int = 4096  # member: queued plus unconfirmed NEWs
    stabinfo_interval: float = 0.1  # gateway: STABINFO from greetings at most this often
    # ------------------------------------------------ coordinator (seeds/001 3.1, 2.3)
    early_new_limit: int = 1024  # early NEWs buffered per member (beyond: dropped)
    mcache_size: int = 65536  # membership cache entries (A6)
    mcache_ttl: float = 60.0  # an entry is forgotten after this
    max_members: int = 4096  # JOINs beyond are refused (dropped, retried by the member)
    member_timeout: float = 30.0  # a member unseen by every host this long is expelled
    # a member that has not delivered this much (bytes, or seconds' worth) is expelled,
    # so a paused application cannot make the hosts hold everything (0: no bound)
    max_backlog_bytes: int = 256 << 20
    max_backlog_age: float = 600.0
    fetch_limit: int = 512  # records in one Fetched (or history) answer
    # ------------------------------------------------ groups (seeds/001 2.2 (i) lifted)
    max_groups: int = 1024  # coordinator: groups with members; joins of further ones refused
    max_member_groups: int = 64  # groups one member may be in (coordinator and member)
    # ------------------------------------------------ history (docs/infra.md, "History")
    retention_age: float = 7 * 86400.0  # host: records kept after stability (0: no bound)
    retention_bytes: int = 1 << 30  # durable host: bytes of its log on disk (0: no bound)
    memory_history_bytes: int = 32 << 20  # host without a data dir: bytes kept in memory
    history_bytes: int = 8 << 20  # member: bytes of a group's history it fetches and keeps
    history_retry: float = 0.5  # member: ask again for history not answered this long
    # ------------------------------------------------ hosts (seeds/004 4.2, 4.5, 5.1, 5.3)
    status_interval: float = 0.1
    host_timeout: float = 0.5  # a host whose last status is older is dead
    election_collect: float = 0.15  # step 3: statuses accepted this long after a start
    election_vote: float = 0.15  # step 7: votes collected this long
    election_announce: float = 0.4  # no master announced this long after voting: restart
    takeover_timeout: float = 0.6  # the elected host waits this long for a quorum of logs
    forward_retry: float = 1.0  # gateway: resend an unacknowledged forward after this
    replicate_retry: float = 0.5  # coordinator: resend records a host has not accepted
    balance_interval: float = 1.0  # master: load check period (seeds/004 4.4)
    balance: bool = True
    max_forward_queue: int = 65536  # gateway: requests kept until sequenced
    max_queued_requests: int = 65536  # coordinator: requests held during a takeover
    batch_records: int = 256  # records per Replicate frame
    checkpoint_every: int = 4096  # durable host: freed records between two checkpoints
    # ------------------------------------------------ outsiders (docs/security.md)
    control_rate: float = 50.0  # gateway, per computer: JOINs, NACKs, arrivals per second
    control_burst: float = 100.0
    control_total_rate: float = 2000.0  # gateway: the same for all computers together
    control_total_burst: float = 4000.0
    control_max_senders: int = 4096  # token buckets kept (the least recently heard go)
    max_local: int = 4096  # gateway: computers heard in the cell (`local`)
    max_dummies: int = 65536  # member, 4.3: dummies one multicast may bridge
    max_early_total: int = 65536  # coordinator: early NEWs of all members together
    max_hosts: int = 64  # hosts in the directory; statuses of further ones are ignored
    max_backbone_frame: int = 64 << 20  # driver: bytes of one backbone frame
    # driver: the cells' IP MTU; a frame that does not fit one packet goes in pieces
    # that do (m2mc.infra.pieces). 0: the cell interface's own MTU (1,500 if unknown)
    cell_mtu: int = 0
    max_backbone_connections: int = 64  # driver: incoming backbone connections
    replay_window: int = 1024  # keyed deployment: counters remembered below a sender's top
    max_auth_senders: int = 4096  # keyed deployment: senders in the replay table
    # ------------------------------------------------ operators (docs/infra.md, "Retiring")
    admin_timeout: float = 10.0  # a host forgets an operator's request unanswered this long
    max_admin_requests: int = 16  # operators' requests a host holds at once; beyond: "busy"

    def check(self) -> InfraConfig:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool):
                continue
            if isinstance(value, int | float) and value < 0:
                raise ConfigError(f"infra.{f.name}: must be >= 0, got {value}")
        for name in ("beacon_interval", "local_timeout", "retransmit", "nack_timer",
                     "status_interval", "host_timeout", "election_collect", "election_vote",
                     "takeover_timeout", "max_datagram", "transfer_chunk", "batch_records",
                     "checkpoint_every", "control_rate", "control_burst", "control_total_rate",
                     "control_total_burst", "control_max_senders", "max_hosts",
                     "max_backbone_frame", "replay_window", "max_auth_senders",
                     "admin_timeout", "max_admin_requests", "history_retry", "uplink_window"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"infra.{name}: must be > 0")
        if self.max_payload > MAX_PAYLOAD_LIMIT:
            raise ConfigError(f"infra.max_payload: at most {MAX_PAYLOAD_LIMIT} bytes (a "
                              "message travels whole in one UDP datagram, with its envelope)")
        if self.cell_mtu and not MIN_CELL_MTU <= self.cell_mtu <= MAX_CELL_MTU:
            raise ConfigError(f"infra.cell_mtu: 0 (the interface's) or {MIN_CELL_MTU} to "
                              f"{MAX_CELL_MTU}, got {self.cell_mtu}")
        if self.max_groups > GROUP_TABLE_LIMIT:
            raise ConfigError(f"infra.max_groups: at most {GROUP_TABLE_LIMIT}")
        if self.host_timeout <= self.status_interval:
            raise ConfigError("infra.host_timeout must exceed infra.status_interval")
        if self.local_timeout <= self.beacon_interval:
            raise ConfigError("infra.local_timeout must exceed infra.beacon_interval")
        return self

    def fitted(self, datagram_limit: int) -> InfraConfig:
        """This configuration with batches (``max_datagram``) that fit a cell datagram
        of ``datagram_limit`` bytes with their envelope: a batch in pieces is lost when
        any piece is, so batches stop at a packet and only a record too large for one
        goes in pieces (docs/decisions.md, "Cell frames never rely on IP
        fragmentation"). Unchanged where the configured bound already fits."""
        fit = datagram_limit - FRAME_ENVELOPE
        return self if self.max_datagram <= fit else replace(self, max_datagram=fit)

    def with_overrides(self, values: dict[str, Any]) -> InfraConfig:
        """A copy with ``values`` (from a TOML table or flags); unknown keys are errors."""
        known = {f.name: f for f in fields(self)}
        clean: dict[str, Any] = {}
        for key, value in values.items():
            if key not in known:
                raise ConfigError(f"infra.{key}: unknown setting")
            current = getattr(self, key)
            if isinstance(current, bool):
                if not isinstance(value, bool):
                    raise ConfigError(f"infra.{key}: expected true or false, got {value!r}")
            elif isinstance(current, int):
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ConfigError(f"infra.{key}: expected an integer, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"infra.{key}: expected a number, got {value!r}")
            clean[key] = value
        return replace(self, **clean).check()
