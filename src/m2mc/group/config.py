"""Settings of the group layer: timers (seconds) and the bounds of every table an
outsider can fill. One object per :class:`~m2mc.group.manager.GroupNode`.

Timers are drawn uniformly from ``[0, x]`` (back-offs) or ``[x/2, x]`` (periodic
jitter) with the node's injected random generator, so a simulation is
reproducible from its seed.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from m2mc.errors import ConfigError
from m2mc.kinds import GROUP_ORDERS
from m2mc.store.retention import MODES, RetentionPolicy

ORDERS = GROUP_ORDERS


@dataclass(slots=True)
class GroupConfig:
    # ---------------------------------------------------------------- GJLP
    adv_reply_backoff: float = 0.2  # grpsInfoList replies to an advertisement: uniform [0, x]
    advertise_on_start: bool = True
    # ---------------------------------------------------------------- back in range
    # (docs/group.md section 4, "Coming back into range") A node that heard no other
    # process for longer than reconnect_silence (0: 3.5 times the members' status
    # keepalive, 10 status_intervals) and then hears one is back; so is one whose
    # driver says its interface came back (network_changed). It then advertises,
    # re-announces the groups it created and runs MSP for every group, after a random
    # back-off in [0, adv_reply_backoff]; at most once per reconnect_holdoff.
    reconnect_silence: float = 0.0
    reconnect_holdoff: float = 5.0
    # ---------------------------------------------------------------- MSP
    sync_backoff: float = 0.25  # the seed's random counter before a SyncResp: uniform [0, x]
    sync_timeout: float = 1.0  # a SyncReq with no answer is repeated after this
    sync_attempts: int = 3  # SyncReqs sent for one catch-up before gap repair takes over
    sync_chunk_bytes: int = 8000  # a SyncResp message carries at most this much
    sync_collision: float = 0.02  # after its first SyncResp a responder waits this long
    # for another responder's first one (the lower pid then goes on alone)
    # ---------------------------------------------------------------- repair
    nack_delay: float = 0.02  # a hole must be this old before it is NACKed
    nack_backoff: float = 0.05  # NACK back-off, uniform [0, x], suppressed by overheard NACKs
    nack_holdoff: float = 0.5  # after a NACK for a range, wait this long before asking again
    nack_holdoff_max: float = 8.0  # holdoff doubles for ranges nobody repairs, up to this
    repair_backoff: float = 0.03  # retransmission back-off, suppressed by overheard copies
    # Holders other than a message's sender answer a NACK in bands of this many, one
    # band per ask (group/repair.py): the repairs of one NACK do not grow with the group.
    repair_band: int = 2
    # up to this many holders (the members but the requester), all answer; and in a
    # group of up to this many members NACK and sync-response back-offs are uniform
    # (larger ones: group/backoff.py)
    repair_everyone: int = 8
    # ---------------------------------------------------------------- status
    status_delay: float = 0.1  # after sending, announce the high-water this much later
    status_interval: float = 1.0  # periodic status (anti-entropy), jittered, suppressible
    # Statuses have a budget (group/status_budget.py, RFC 3550 section 6.2): each carries
    # at most status_slice high-waters and status_slice membership entries, and the
    # group's periodic statuses together take at most status_share of its data bytes/s,
    # or status_floor bytes/s when it carries less; status_interval is the shortest
    # interval, kept by groups of up to status_slice members (whose statuses carry
    # everything) and by busy ones. In a larger group the status after sending is bare.
    status_slice: int = 8
    # In a larger group the bare status after sending gives way to the records sent
    # since the last one, sent again, when the chance that some member lacks them (from
    # this node's own loss) is at least repeat_above (group/repeats.py; above 1: never).
    repeat_above: float = 0.8
    status_share: float = 0.25
    status_floor: int = 200
    sequencer_timeout: float = 4.0  # total order: a silent sequencer is replaced after this
    # Total order (docs/group.md section 5): the sequencer re-sends stamps a majority has
    # not acknowledged after order_retry (doubling up to status_interval); a member of
    # the configuration silent for member_timeout is taken out of it (through the log).
    order_retry: float = 0.1
    member_timeout: float = 12.0
    leave_linger: float = 3.0  # after leaving, keep answering repairs this long
    # ---------------------------------------------------------------- batching
    batch_bytes: int = 480  # data records share one M2MP message up to this size
    # While more than bulk_backlog packets wait in M2MP (the node sends faster than the
    # network takes them), batches grow to bulk_batch_bytes (four packets): a third
    # less work per message at every receiver, at the price that a lost packet
    # costs the batch. Set bulk_batch_bytes = batch_bytes to keep one packet.
    bulk_batch_bytes: int = 1900
    bulk_backlog: int = 64
    # A steady sender (its batches go less than batch_hold seconds apart) holds its
    # next records (as a bulk batch) until batch_hold after the last batch or until
    # a bulk batch is full: a sender of many small messages then sends full packets,
    # several in one system call, and wakes its receivers a few times less; one that
    # sends less often, or the second message of a burst, is not held. 0: never
    # held (docs/decisions.md, "Small messages are held up to half a millisecond").
    batch_hold: float = 0.0005
    # ---------------------------------------------------------------- retention
    # The group log (GrpMsgList, docs/group.md section 8): per group, the delivered
    # messages stored more than retention_age seconds ago, or past retention_bytes, are
    # evicted, oldest first; 0: no bound of that kind. By default 30 days and 256 MiB
    # per group, what a chat on a laptop lives with (docs/decisions.md, "The ad hoc
    # log has a default retention"). A log in memory (no data_dir) keeps at most
    # memory_log_bytes per group in any case. Mode "full": an evicted
    # message is dropped whole; "ids" (seeds/000 VI.A.3): only its payload, its
    # identity, parent, position and clock stay (at most retention_ids per group).
    retention_age: float = 30 * 86_400.0
    retention_bytes: int = 256 << 20
    retention_mode: str = "full"
    retention_ids: int = 1_000_000
    memory_log_bytes: int = 32 << 20
    # A message a member reported gone (evicted everywhere it asked) that is still
    # missing this long after the report is given up: skipped, counted, traced and
    # reported to the application (MessagesSkipped), so ordering goes on.
    gone_grace: float = 1.0
    # ---------------------------------------------------------------- bounds
    max_payload: int = 60_000
    max_message_bytes: int = 1_000_000  # a larger group message is dropped undecoded
    max_held: int = 100_000  # per group, in the ordering core (refused beyond)
    max_unstamped: int = 100_000  # total order: data waiting for its gseq
    max_uncommitted: int = 1024  # total order: stamps out before a majority holds them
    max_epoch_jump: int = 1 << 16  # total order: a ballot this far past the newest is absurd
    max_groups: int = 256  # GIIT rows plus discovered groups
    max_members: int = 1024  # membership entries per group
    max_digest_intervals: int = 4096  # intervals in a digest we send or accept
    max_nack_intervals: int = 256
    max_pending_repairs: int = 20_000  # retransmissions waiting for their back-off
    max_sync_messages: int = 100_000  # messages one SyncResp series may carry
    max_sync_bytes: int = 16 << 20  # record bytes one SyncResp series may carry
    max_mirs: int = 64  # concurrent MIRs (sync requests being answered)
    max_pssit: int = 4096  # PSSIT rows (requesting processes remembered)
    max_status_senders: int = 256  # per-sender high-waters in a status message
    max_seq: int = 1 << 40  # sequence numbers at or above this are absurd: dropped
    max_seq_jump: int = 1 << 20  # a seqno this far past a sender's known high-water is absurd
    max_senders: int = 4096  # distinct senders tracked per group (records of more: dropped)
    # Back-pressure on the sender (docs/api.md): send() waits while the packets queued in
    # M2MP plus the records not packed yet reach send_backlog, or while a message would
    # take their bytes past send_backlog_bytes (one larger message goes alone); blocked
    # senders go on once both are down to half.
    send_backlog: int = 4096
    send_backlog_bytes: int = 1 << 20
    # Receiver-paced flow control (group/window.py): Group.send also waits while
    # send_window_bytes of our data are not acknowledged by every member that
    # acknowledged within send_window_wait; members send a status per quarter window
    # of data read. 0: no window. A node on a socket lowers it to half of what its
    # socket buffer holds (GroupNode.fit_window): the 4 MiB the channel asks for
    # hold 8 MiB in the kernel's count, Linux's default buffer 416 KiB.
    send_window_bytes: int = 4 << 20
    send_window_wait: float = 0.5  # (streams: 2x the wait for a silent receiver, section 12)
    # ---------------------------------------------------------------- streams
    # (docs/group.md section 12) A message of any size sent as a stream: its body goes in
    # chunks of stream_chunk_bytes beside the ordering; a receiver keeps at most
    # stream_window early chunks' indexes per stream (the bytes go to its body store),
    # receives at most max_streams at once, gives one up after stream_timeout without
    # progress, and keeps bodies (complete or not) up to stream_store_bytes (oldest
    # complete ones evicted first). At most max_stream_repairs chunks wait to be sent
    # again for others.
    stream_chunk_bytes: int = 16_000
    # (4,096 chunks, 64 MB of body: what arrives while one lost chunk is repaired at
    # loopback speed; 64 refused most of a 1 GiB body after a loss, docs/decisions.md)
    stream_window: int = 4096
    max_streams: int = 16
    max_streams_waiting: int = 1024  # bodies to fetch once a slot frees (oldest dropped)
    stream_timeout: float = 30.0
    stream_store_bytes: int = 4 << 30
    max_stream_repairs: int = 256
    # ---------------------------------------------------------------- security
    # Control messages (ADV, GRPS_INFO, SYNC_REQ, NACK) are rate-limited per sender
    # (token bucket of control_burst, refilled at control_rate per second) and in total
    # over all senders; refused ones are dropped and counted (rate_limited). Discovery
    # (ADV, GRPS_INFO) and each group (SYNC_REQ, NACK) have limiters of their own with
    # these settings. Each per-sender table holds max_senders buckets (least recently
    # heard forgotten).
    control_rate: float = 50.0
    control_burst: float = 100.0
    control_total_rate: float = 2000.0
    control_total_burst: float = 4000.0
    replay_window: int = 1024  # keyed groups: counters remembered below a sender's highest

    def validate(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool):
                continue
            if isinstance(value, int | float) and value < 0:
                raise ConfigError(f"group config {f.name} must be >= 0, got {value}")
        for name in ("sync_chunk_bytes", "batch_bytes", "max_payload", "max_message_bytes",
                     "max_groups", "max_members", "max_digest_intervals",
                     "max_nack_intervals", "max_mirs", "max_sync_bytes", "max_pssit",
                     "sync_attempts",
                     "status_interval", "sync_timeout", "nack_holdoff", "control_rate",
                     "control_burst", "control_total_rate", "control_total_burst",
                     "replay_window", "max_senders", "order_retry", "max_uncommitted",
                     "max_epoch_jump", "sequencer_timeout", "memory_log_bytes",
                     "send_backlog", "send_backlog_bytes", "stream_chunk_bytes",
                     "stream_window", "max_streams", "max_streams_waiting", "stream_timeout",
                     "stream_store_bytes", "send_window_wait",
                     "max_stream_repairs", "repair_band", "status_slice",
                     "status_floor"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"group config {name} must be > 0, got {getattr(self, name)}")
        if self.nack_holdoff_max < self.nack_holdoff:
            raise ConfigError("group config nack_holdoff_max must be >= nack_holdoff")
        if self.stream_chunk_bytes > 65536:
            raise ConfigError("group config stream_chunk_bytes must be at most 65536, got "
                              f"{self.stream_chunk_bytes}")
        if self.retention_mode not in MODES:
            raise ConfigError(f"group config retention_mode must be one of {', '.join(MODES)}, "
                              f"got {self.retention_mode!r}")

    def retention(self) -> RetentionPolicy:
        """The group log's retention policy (m2mc.store.retention)."""
        return RetentionPolicy(age=self.retention_age, max_bytes=self.retention_bytes,
                               mode=self.retention_mode, max_ids=self.retention_ids,
                               memory_bytes=self.memory_log_bytes)

    @classmethod
    def from_mapping(cls, values: dict[str, object]) -> GroupConfig:
        """Build from a mapping (a TOML table); unknown keys are an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown group config key(s): {', '.join(unknown)}")
        config = cls()
        for key, value in values.items():
            current = getattr(config, key)
            if isinstance(current, bool):
                if not isinstance(value, bool):
                    raise ConfigError(f"group config {key} must be true or false")
            elif isinstance(current, int) and not isinstance(current, bool):
                if not isinstance(value, int) or isinstance(value, bool):
                    raise ConfigError(f"group config {key} must be an integer")
            elif isinstance(current, str):
                if not isinstance(value, str):
                    raise ConfigError(f"group config {key} must be a string")
            elif isinstance(current, float):
                if not isinstance(value, int | float) or isinstance(value, bool):
                    raise ConfigError(f"group config {key} must be a number")
                value = float(value)
            setattr(config, key, value)
        config.validate()
        return config
