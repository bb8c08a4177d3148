"""One host of infrastructure mode: a gateway for its cell, a replica of the
coordinator's log, a voter, and the coordinator itself when elected master.

Sans-IO: the driver feeds :meth:`HostCore.receive_backbone` (frames from other
hosts, over reliable FIFO links), :meth:`HostCore.receive_cell` (uplink frames
from members), :meth:`HostCore.on_timer`, and sends what :meth:`HostCore.drain`
returns: :class:`HostSend` values for the backbone (``dest`` a host ID, or None
for every peer) or the cell (``dest`` a member address, or None to broadcast).

Frames are encoded and decoded by the injected :class:`~m2mc.infra.wire.InfraWire`:
in a keyed deployment every frame is sealed, and a backbone frame's source is the
host that sealed it (the name a TCP connection announced is not trusted). Tables
keyed by host id (directory, votes, replication peers, takeover answers) take only
hosts the directory admitted, at most ``max_hosts``.

The hosts' configuration (who is retired for good) is in the log too; this host
counts quorums under its committed configuration, ignores retired hosts, and stops
for good when it learns it was retired itself (:mod:`m2mc.infra.host_admin`).

A durable host keeps its promise and log across restarts (:mod:`.host_durable`): its
driver commits :meth:`HostCore.take_save` after each :meth:`HostCore.drain`, before
sending, and gives a restarted core its saved state (:meth:`HostCore.restore`).

The host is made of objects with explicit references: this core holds its
:class:`~m2mc.infra.host_succession.Succession` and its
:class:`~m2mc.infra.host_admin.Operators`, which see it only through their narrow
ports in :mod:`m2mc.infra.host_ports` and never import this module.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, replace

from m2mc.core import Save
from m2mc.errors import DecodeError
from m2mc.infra import messages as msg
from m2mc.infra.balance import reroute
from m2mc.infra.config import InfraConfig
from m2mc.infra.coordinator import Coordinator
from m2mc.infra.directory import Directory
from m2mc.infra.election import Election
from m2mc.infra.gateway import Gateway
from m2mc.infra.host_admin import Operators
from m2mc.infra.host_durable import HostSaver
from m2mc.infra.host_persist import HostCommit, StoredHost
from m2mc.infra.host_stats import HostStats, security_stats
from m2mc.infra.host_succession import Succession
from m2mc.infra.ids import NO_EPOCH, Epoch
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.takeover import TakeoverRound
from m2mc.infra.wire import InfraWire
from m2mc.trace.schema import NullSink, TraceEvent, TraceSink, detail_json

_FOR_COORDINATOR = (msg.Forward, msg.StabInfo, msg.Subscribe, msg.Unsubscribe, msg.Fetch,
                    msg.Reconfig, msg.HistoryAsk)
_SUCCESSION = (msg.ElectStart, msg.Vote, msg.Takeover, msg.StateReply, msg.TakeoverReject,
               msg.Recover, msg.RecoverReply)
ADMIN = "admin"  # HostSend.link of an answer to an operator's command line (dest: its name)


@dataclass(frozen=True, slots=True)
class HostIdentity:
    host: str
    address: str = "127.0.0.1"
    port: int = 0
    cell: str = ""  # the cell's channel (multicast URL, or the simulator's domain)
    uplink: str = ""  # where members send (a unicast address, or the host ID)


@dataclass(frozen=True, slots=True)
class HostSend:
    link: str  # "backbone" | "cell" | "admin" (back to a command line)
    dest: str | None
    data: bytes
    # an uplink frame's Ack (A2) holds nothing of the log: a driver may send it before
    # the step's save is committed (docs/infra.md, "Durable hosts")
    unsaved: bool = False


class HostCore:
    def __init__(self, ident: HostIdentity, cfg: InfraConfig, rng: random.Random, *,
                 expected_hosts: int = 1, trace: TraceSink | None = None, run_id: str = "",
                 incarnation: int = 0, group: str = "infra",
                 wire: InfraWire | None = None, durable: bool = False) -> None:
        self.ident = ident
        self.wire = wire or InfraWire()
        self.me = ident.host
        self.cfg = cfg
        self.rng = rng
        self.trace: TraceSink = trace or NullSink()
        self.run_id = run_id
        self.group = group
        self.incarnation = incarnation
        self.log = ReplicaLog(cfg.mcache_size, cfg.mcache_ttl)
        self.gateway = Gateway(self.me, cfg, self.log, ident.uplink or self.me)
        self.directory = Directory(self.me, cfg.host_timeout, expected_hosts)
        self.coordinator: Coordinator | None = None
        self.master = ""
        self.epoch: Epoch = NO_EPOCH
        self.commit = 0
        self.stable = 0
        self.stats = HostStats()
        self.first_sequenced: tuple[float, int] | None = None  # (time, gseq) after a takeover
        self._reported_first = True
        self._queued: deque[tuple[str, msg.BackboneMessage]] = deque()
        self._local: deque[tuple[str, msg.BackboneMessage]] = deque()
        self._bb: list[tuple[str | None, msg.BackboneMessage]] = []
        self._last_gap = -1
        self._started = 0.0
        self._next_status = 0.0
        self._next_balance = 0.0
        self.retired: frozenset[str] = frozenset()  # committed configuration (never freed)
        self.config_lsn = 0
        self.retired_self = ""  # why this host stopped for good ("" while it serves)
        self.ops = Operators(self, cfg)
        self.saver = HostSaver(self.log, cfg.checkpoint_every) if durable else None
        self.succession = Succession(self, rng)
        self.notices: list[str] = []  # for the operator's log (the driver takes them)

    @property
    def queued_requests(self) -> int:
        """Requests for the coordinator held while it is being installed."""
        return len(self._queued)

    @property
    def election(self) -> Election:
        return self.succession.election

    @property
    def takeover(self) -> TakeoverRound | None:
        return self.succession.takeover

    @takeover.setter
    def takeover(self, round_: TakeoverRound | None) -> None:
        self.succession.takeover = round_

    # ================================================================ driver API
    def start(self, now: float) -> None:
        self._started = now
        self._next_status = now
        self.succession.start(now)
        self._next_balance = now + self.cfg.balance_interval
        self.send_status(now)

    def restore(self, stored: StoredHost, now: float) -> None:
        """Take up a durable host's saved promise and log (before :meth:`start`);
        :class:`~m2mc.errors.SavedStateError` if they do not hold together."""
        if self.saver is None:
            raise ValueError("restore() needs a durable host")
        self.saver.restore(stored, now)
        log = self.log
        self.election.see_round(log.promised.round)
        self.gateway.relay_high = log.committed_gseq()  # members NACK what they missed
        self.ops.check_configuration(now)
        self.emit("elect", now, detail_json(phase="restored", promised=str(log.promised),
                                             log_epoch=str(log.log_epoch), applied=log.applied,
                                             high=log.high))

    def move_uplink(self, uplink: str, now: float) -> bool:
        """Members reach this host at ``uplink`` from now on (its driver bound the uplink
        again on its interface's new address): its identity says so, and its beacons,
        starting with one at once; its status and its own cell in the directory follow
        at the next status interval. False if that was already its uplink."""
        if uplink == (self.ident.uplink or self.me):
            return False
        self.ident = replace(self.ident, uplink=uplink)
        self.gateway.move_uplink(uplink, now)
        return True

    def take_save(self, now: float) -> Save[HostCommit] | None:
        """What must be durable before the output drained so far leaves (None: nothing)."""
        save = None if self.saver is None else self.saver.take(now)
        if save is not None:
            self.stats.saves += 1
        return save

    def admin(self, client: str, request: int, op: int, target: str, now: float) -> None:
        """An operator's request made here; answers leave :meth:`drain` as ``admin``."""
        self.ops.request(client, request, op, target, now)
        self._settle(now)

    def receive_backbone(self, src: str, data: bytes, now: float) -> None:
        if self.retired_self:
            return
        try:
            m, sealed_by = self.wire.decode(data)
        except DecodeError:
            self.stats.decode_errors += 1
            return
        if sealed_by is not None:
            src = sealed_by
        self._local.append((src, m))  # type: ignore[arg-type]
        self._settle(now)

    def receive_cell(self, src: str, data: bytes, now: float) -> None:
        if self.retired_self or self.succession.recovering:
            return  # (a recovering host has no tables to judge a member by)
        try:
            m, _ = self.wire.decode(data)
        except DecodeError:
            self.stats.decode_errors += 1
            return
        if isinstance(m, msg.UplinkMessage):
            self.gateway.on_uplink(src, m, now)
            self._settle(now)

    def on_timer(self, now: float) -> None:
        if self.retired_self:
            return
        cfg = self.cfg
        if now >= self._next_status:
            self._next_status = now + cfg.status_interval
            self.send_status(now)
            if self.directory.expire(now):
                self.refresh_directory()
            if self.coordinator is not None:  # our own cell counts as "seen" too
                self.coordinator.saw_members(tuple(self.gateway.local_m), now)
                self.coordinator.check_members(now)
                for mid in self.coordinator.check_backlogs(now):
                    self.notice(f"expelled {mid}: it delivered nothing for too long (its "
                                "backlog passed max_backlog_bytes or max_backlog_age)")
            self.refresh_directory()
        self.succession.tick(now)
        if self.coordinator is not None and cfg.balance and now >= self._next_balance:
            self._next_balance = now + cfg.balance_interval
            self._balance()
        if not self.succession.recovering:  # no beacons before we hold the log
            self.gateway.tick(now)
        self._settle(now)

    def next_deadline(self) -> float | None:
        if self.retired_self:
            return None
        ds = [self._next_status]
        if not self.succession.recovering:
            ds.append(self.gateway.next_deadline())
        for d in (self.ops.desk.next_deadline(), self.succession.next_deadline()):
            if d is not None:
                ds.append(d)
        if self.coordinator is not None and self.cfg.balance:
            ds.append(self._next_balance)
        if self.gateway.transfers_ready() or self._bb or self.gateway.cell_out or self.ops.out:
            ds.append(0.0)
        return min(ds)

    def drain(self, now: float) -> list[HostSend]:
        """Everything to send now, encoded."""
        self.ops.desk.expire(now)
        if self.coordinator is not None:
            self.coordinator.flush(self.directory.live(), self.directory.quorum(), now,
                                  self.directory.known)
            self.route_coordinator()
        self.gateway.flush(now)
        self._settle(now)
        out: list[HostSend] = []
        cache: dict[tuple[int, str | None], bytes] = {}
        encode = self.wire.encode
        for dest, m in self._bb:
            data = cache.get((id(m), dest))
            if data is None:  # sealed for its receiver: a copy replayed elsewhere is refused
                data = cache[(id(m), dest)] = encode(m, dest or "")
            out.append(HostSend("backbone", dest, data))
        self._bb = []
        for dest_addr, dm in self.gateway.cell_out:
            out.append(HostSend("cell", dest_addr, encode(dm), type(dm) is msg.Ack))
        self.gateway.cell_out = []
        for client, result in self.ops.out:
            out.append(HostSend(ADMIN, client, encode(result, client)))
            self.emit("elect", now, detail_json(phase="admin", client=client,
                                                 request=result.request, code=result.code,
                                                 lsn=result.lsn))
        self.ops.out = []
        return out

    # ================================================================ routing
    def _settle(self, now: float) -> None:
        """Run messages addressed to ourselves until none is left."""
        while True:
            for m in self.gateway.to_coord:
                self._to_master(m)
            self.gateway.to_coord = []
            if not self._local:
                break
            src, m = self._local.popleft()
            self._on_backbone(src, m, now)
            self.route_coordinator()
        c = self.coordinator
        if c is not None and c.update_commit(self.directory.quorum(), set(self.directory.live())):
            self._advance(c.commit, c.stable_watermark(), now)
        if c is not None and not self._reported_first and c.first_app_gseq is not None:
            self._reported_first = True
            self.first_sequenced = (now, c.first_app_gseq)
            self.emit("elect", now, detail_json(phase="first_sequenced", epoch=str(c.epoch),
                                                 gseq=c.first_app_gseq))

    def route_coordinator(self) -> None:
        if self.coordinator is None:
            return
        for dest, m in self.coordinator.drain():
            self.send_to(dest, m)

    def send_to(self, dest: str, m: msg.BackboneMessage) -> None:
        if dest == self.me:
            self._local.append((self.me, m))
        else:
            self._bb.append((dest, m))

    def _to_master(self, m: msg.BackboneMessage) -> None:
        if self.master:
            self.send_to(self.master, m)

    # ================================================================ backbone input
    def _on_backbone(self, src: str, m: msg.BackboneMessage, now: float) -> None:
        if self.retired_self or self.ops.refuse(src, m):
            return
        if isinstance(m, _FOR_COORDINATOR):
            self._for_coordinator(src, m, now)
        elif isinstance(m, _SUCCESSION):
            self.succession.on_message(m, now, self._admitted)
        elif isinstance(m, msg.Replicate):
            if not self.succession.recovering:
                self._on_replicate(src, m, now)
        elif isinstance(m, msg.Commit):
            if m.epoch == self.epoch:  # the commit point counts even for a non-replica
                self._advance(m.commit, m.stable, now)
                self._maybe_free_replica(m)
        elif isinstance(m, msg.Accepted):
            if self.coordinator is not None and self._admitted(m.host):
                self.coordinator.handle_accepted(m, now)
        elif isinstance(m, msg.FwdAck):
            self.gateway.on_fwd_ack(m)
        elif isinstance(m, msg.Status):
            self._on_status(m, now)
        elif isinstance(m, msg.Sync):
            self._on_sync(src, m, now)
        elif isinstance(m, msg.Fetched | msg.HistoryAnswer):  # copies of older records
            self.gateway.on_copies(m)
        elif isinstance(m, msg.Reroute) and m.epoch == self.epoch:
            self.gateway.on_reroute(m.count, m.target)
        elif isinstance(m, msg.AdminRequest):
            if m.client == src:  # answers go back on the connection that asked
                self.ops.request(m.client, m.request, m.op, m.target, now)
        elif isinstance(m, msg.AdminResult):
            self.ops.on_result(m)
        elif isinstance(m, msg.RetiredNotice):
            self.ops.on_notice(m, now)

    def _for_coordinator(self, src: str, m: msg.BackboneMessage, now: float) -> None:
        c = self.coordinator
        if c is None:
            if self.takeover is not None or self.master == self.me:
                if len(self._queued) < self.cfg.max_queued_requests:
                    self._queued.append((src, m))
                else:
                    self.stats.queued_dropped += 1
            elif isinstance(m, msg.Reconfig):
                self.ops.on_reconfig(m, now)  # answered: not the master
            return
        if isinstance(m, msg.Forward):
            c.handle_forward(m, now)
        elif isinstance(m, msg.StabInfo):
            c.handle_stabinfo(m.pairs)
        elif isinstance(m, msg.Subscribe):
            st = self.directory.status(m.host)
            applied = self.log.applied if m.host == self.me else (st.commit if st else 0)
            c.handle_subscribe(m.host, applied, now)
            if m.host == self.me:
                self.gateway.on_synced()
        elif isinstance(m, msg.Unsubscribe):
            c.handle_unsubscribe(m.host)
        elif isinstance(m, msg.Fetch | msg.HistoryAsk):  # copies of older records
            c.handle_read(m)
        elif isinstance(m, msg.Reconfig) and self._admitted(m.host):
            self.ops.on_reconfig(m, now)

    def _on_replicate(self, src: str, m: msg.Replicate, now: float) -> None:
        if m.epoch < self.log.promised or m.epoch < self.epoch:
            return  # an old master's records: refused (docs/infra.md)
        if m.epoch > self.epoch:
            self.follow(src, m.epoch, now)
        if self.log.log_epoch != m.epoch:
            self._gap(m.epoch, self.log.applied)  # not synced yet: ask for a Sync
            return
        if not self.log.append(m.records):
            self._gap(m.epoch, self.log.high)
            return
        self._last_gap = -1
        self.send_to(src, msg.Accepted(m.epoch, self.me, self.log.high))
        self._advance(m.commit, self.stable, now)

    def _gap(self, epoch: Epoch, high: int) -> None:
        if high != self._last_gap:  # one notice per hole, not one per message
            self._last_gap = high
            self._to_master(msg.Accepted(epoch, self.me, high, gap=True))

    def _on_sync(self, src: str, m: msg.Sync, now: float) -> None:
        if m.epoch < self.log.promised or m.epoch < self.epoch \
                or not self.succession.allows_sync(m.epoch):
            return
        self.log.promised = m.epoch
        if m.epoch > self.epoch or self.master != src:
            self.follow(src, m.epoch, now)
        if not self.log.replace_after(m.base, m.snapshot, m.records, now):
            self._gap(m.epoch, self.log.applied)
            return
        self.log.log_epoch = m.epoch
        self._last_gap = -1
        self.succession.synced(now)
        self.send_to(src, msg.Accepted(m.epoch, self.me, self.log.high))
        self.gateway.on_synced()
        self._advance(m.commit, self.stable, now)

    def follow(self, master: str, epoch: Epoch, now: float) -> None:
        """Accept ``master`` of ``epoch`` as coordinator."""
        if self.coordinator is not None and self.coordinator.epoch < epoch:
            self.coordinator = None  # a newer master exists: step down
        if self.takeover is not None and self.takeover.epoch < epoch:
            self.takeover = None
        self.master = master
        self.epoch = epoch
        self.commit = 0
        self.election.see_round(epoch.round)
        self.election.settle()
        self.gateway.new_master(master, epoch, now)
        self.emit("elect", now, detail_json(phase="follow", epoch=str(epoch), master=master))
        self.ops.on_new_master(now)

    def _advance(self, commit: int, stable: int, now: float) -> None:
        if commit > self.commit:
            self.commit = commit
        self.stable = max(self.stable, stable)
        if self.log.log_epoch == self.epoch:  # our log is this epoch's: apply what is held
            refused = self.log.refused
            records = self.log.commit_to(self.commit, now)
            if records:
                self.gateway.on_committed(records)
            if self.log.refused != refused and self.coordinator is None:
                # The tail was dropped: the master must not go on counting it as held.
                self._gap(self.epoch, self.log.applied)
        self.gateway.on_commit_point(self.commit, self.stable)
        self.log.gc(min(self.stable, self.log.committed_gseq()), now)
        c = self.coordinator
        self.ops.check_configuration(now)  # first: answers tell the new quorum
        if c is not None:
            self.ops.on_committed(c.commit, now)

    def _maybe_free_replica(self, c: msg.Commit) -> None:
        """4.1, figure 7 line 15: a gateway that left the subscr-set and is no replica
        frees its tables; a later SUBSCOK (Sync) brings them back."""
        g = self.gateway
        if not self.cfg.subscribe or g.subscribed or g.sub_requested or self.me in c.replicas:
            return
        if self.log.high or self.log.state.rows:
            promised = self.log.promised
            self.log.reset()
            self.log.promised = promised

    # ================================================================ status, discovery
    def _status(self, eid: Epoch | None) -> msg.Status:
        i = self.ident
        return msg.Status(self.me, self.incarnation, i.address, i.port, i.cell,
                          i.uplink or self.me, self.gateway.load(), tuple(self.gateway.local_m),
                          self.master if self._master_active() else "", self.epoch,
                          self.log.log_epoch, self.log.applied, self.log.high, eid)

    def send_status(self, now: float) -> None:
        voting = self.election.running and self.election.state.value == "voting"
        st = self._status(self.election.eid if voting else None)
        self._bb.append((None, st))
        if voting:
            self.election.on_status(st, now)  # we are a participant too

    def _master_active(self) -> bool:
        return self.master == self.me and self.coordinator is not None

    def _admitted(self, host: str) -> bool:
        if host == self.me or host in self.directory.known:
            return True
        self.stats.unknown_host += 1
        return False

    def _on_status(self, st: msg.Status, now: float) -> None:
        if st.host == self.me:
            return
        if st.host not in self.directory.known \
                and len(self.directory.known) >= self.cfg.max_hosts:
            self.stats.hosts_refused += 1
            return
        fresh, restarted = self.directory.on_status(st, now)
        self.election.see_round(max(st.epoch.round, st.eid.round if st.eid else 0))
        if st.eid is not None and st.eid > self.election.eid \
                and not self.succession.recovering and self.election.on_start(st.eid, now):
            self.send_status(now)
        self.election.on_status(st, now)
        if restarted and st.host == self.master:
            self.master = ""  # it restarted: it leads no more (an election follows)
        c = self.coordinator
        if c is not None:
            if restarted:
                c.peers.pop(st.host, None)
            c.note_status(st, now)
        if st.master == st.host and st.epoch > self.epoch and st.epoch >= self.log.promised:
            self.follow(st.host, st.epoch, now)  # a master we missed the takeover of
        if fresh or restarted:
            self.refresh_directory()

    def refresh_directory(self) -> None:
        cells = []
        for h in self.directory.live():
            if h == self.me:
                cells.append(msg.CellInfo(h, self.ident.cell, self.ident.uplink or h,
                                          self.gateway.load()))
            else:
                st = self.directory.status(h)
                if st is not None:
                    cells.append(msg.CellInfo(h, st.cell, st.uplink, st.load))
        self.gateway.directory = tuple(cells)

    def master_alive(self) -> bool:
        if not self.master:
            return False
        if self.master == self.me:
            return self.coordinator is not None or self.takeover is not None
        return self.directory.is_live(self.master)

    # ================================================================ the succession's port
    def broadcast(self, m: msg.BackboneMessage) -> None:
        self._bb.append((None, m))

    def lead(self, epoch: Epoch, now: float) -> None:
        """We won ``epoch``: the takeover runs, and we are the master it makes."""
        self.coordinator = None
        self.master = self.me
        self.epoch = epoch
        self.commit = 0
        self.gateway.new_master(self.me, epoch, now)

    def install(self, c: Coordinator, now: float) -> None:
        """The takeover is done: ``c`` sequences from now on."""
        self.coordinator = c
        self._reported_first = False
        queued, self._queued = self._queued, deque()
        for src, qm in queued:
            self._for_coordinator(src, qm, now)
        self.ops.on_new_master(now)
        self.route_coordinator()

    def check_configuration(self, now: float) -> None:
        self.ops.check_configuration(now)

    # ================================================================ the operators' port
    def configure(self, lsn: int, retired: frozenset[str]) -> None:
        """Take the committed configuration of log position ``lsn`` (the operators' desk
        found it in the log): quorums count without the retired hosts from now on."""
        self.config_lsn = lsn
        self.retired = retired
        self.directory.retired = retired
        c = self.coordinator
        if c is not None:
            for h in retired:
                c.peers.pop(h, None)
        self.refresh_directory()

    def stop_serving(self, why: str, now: float) -> None:
        """Retired for good: a master first sends the commit point (so the others learn
        of the change from it), then this host stops serving."""
        c = self.coordinator
        if c is not None:
            c.flush(self.directory.live(), self.directory.quorum(), now, self.directory.known)
            self.route_coordinator()
        self.retired_self = why
        self.coordinator = None
        self.succession.stop()

    def notice(self, text: str) -> None:
        self.notices.append(text)

    def _balance(self) -> None:
        order = reroute(self.gateway.directory, self.me, self.gateway.load())
        if order is None:
            return
        source, count, target = order
        if source == self.me:
            self.gateway.on_reroute(count, target)
        else:
            self._bb.append((source, msg.Reroute(self.epoch, count, target)))

    def security_stats(self) -> dict[str, int]:
        """What was refused, and why: frames (wire, auth), rate limits, full tables."""
        return security_stats(self.wire.counters(), self.stats, self.gateway.stats,
                              self.log.refused,
                              None if self.coordinator is None else self.coordinator.stats)

    # ================================================================ trace
    def emit(self, event: str, now: float, detail: str) -> None:
        if self.trace.enabled:
            self.trace.emit(TraceEvent(self.run_id, self.me, now, event, self.group, None, None,
                                       None, None, None, None, detail))
