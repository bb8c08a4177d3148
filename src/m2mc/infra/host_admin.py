"""An infrastructure-mode host's side of the operators' commands (``m2mc host show``,
``retire``, ``readmit``) and of host retirement (docs/infra.md, "Retiring a host").

A command line connects to any host's backbone and sends an
:class:`~m2mc.infra.messages.AdminRequest`. ``show`` is answered at once from the
host's own view. ``retire`` and ``readmit`` go to the master (a
:class:`~m2mc.infra.messages.Reconfig`), which checks them
(:func:`~m2mc.infra.reconfig.check_change`), appends the RETIRED or ADMITTED record
and answers once it is committed; the host that took the request passes the answer
back to the command line. Sans-IO: :class:`Operators` is one object of a
:class:`~m2mc.infra.host.HostCore`, which it sees only through the narrow port
:class:`~m2mc.infra.host_ports.AdminSeat` (what it reads of the host, what it sends,
and the two calls that change the host's configuration or stop it).
"""

from __future__ import annotations

import json
from dataclasses import replace

from m2mc.infra import messages as msg
from m2mc.infra import reconfig
from m2mc.infra.config import InfraConfig
from m2mc.infra.host_ports import AdminSeat
from m2mc.infra.ids import MemberId
from m2mc.infra.wire import claimed_sender
from m2mc.trace.schema import detail_json

_OP_NAMES = {msg.OP_SHOW: "show", msg.OP_RETIRE: "retire", msg.OP_READMIT: "readmit"}


class Operators:
    """Operators' requests and the configuration of one host (seen through its
    :class:`~m2mc.infra.host_ports.AdminSeat`)."""

    def __init__(self, seat: AdminSeat, cfg: InfraConfig) -> None:
        self.seat = seat
        self.desk = reconfig.AdminDesk(cfg.max_admin_requests, cfg.admin_timeout)
        self.out: list[tuple[str, msg.AdminResult]] = []  # answers for command lines
        self.notices = 0  # RetiredNotices sent

    # ------------------------------------------------------------ command lines
    def request(self, client: str, request: int, op: int, target: str, now: float) -> None:
        """An operator's request (from the network, or the simulator's schedule)."""
        host = self.seat
        if op == msg.OP_SHOW:
            self.out.append((client, msg.AdminResult(host.me, client, request, reconfig.OK,
                                                     self.view())))
            return
        if op not in msg.ADMIN_OPS:
            self.out.append((client, msg.AdminResult(host.me, client, request, reconfig.BAD_OP,
                                                     f"unknown operation {op}")))
            return
        if not self.desk.take(client, request, op, target, now):
            self.out.append((client, msg.AdminResult(
                host.me, client, request, reconfig.BUSY,
                f"{host.me} holds {self.desk.limit} requests already; try again")))
            return
        self._route(client, request, now)

    def _route(self, client: str, request: int, now: float) -> None:
        """Do a held request here (master), or pass it to the master."""
        host = self.seat
        p = self.desk.clients.get((client, request))
        if p is None:
            return
        if host.coordinator is not None:
            p.resent = p.resent or bool(p.sent_to and p.sent_to != host.me)
            p.sent_to = host.me
            self.reconfigure(host.me, client, request, p.op, p.target, now)
        elif host.master and host.master != host.me and host.directory.is_live(host.master):
            p.resent = p.resent or bool(p.sent_to and p.sent_to != host.master)
            p.sent_to = host.master
            host.send_to(host.master, msg.Reconfig(host.me, client, request, p.op, p.target))
        elif not p.sent_to:
            self.answer(host.me, client, request, reconfig.NO_MASTER,
                        "no master right now (an election is under way, or no quorum of "
                        "hosts is up); try again")

    def on_new_master(self, now: float) -> None:
        """A new master: pass it the requests the old one may have lost."""
        host = self.seat
        here = host.me if host.coordinator is not None else host.master
        for client, request in [k for k, p in self.desk.clients.items() if p.sent_to != here]:
            self._route(client, request, now)

    def on_reconfig(self, m: msg.Reconfig, now: float) -> None:
        self.reconfigure(m.host, m.client, m.request, m.op, m.target, now)

    def reconfigure(self, origin: str, client: str, request: int, op: int, target: str,
                    now: float) -> None:
        """On the master: check the change, append its record, answer once committed."""
        host = self.seat
        c = host.coordinator
        if c is None:
            self.answer(origin, client, request, reconfig.NO_MASTER,
                        f"{host.me} is no longer the master; try again")
            return
        try:
            kind = reconfig.check_change(op, target, known=host.directory.known,
                                         committed=host.retired, working=c.work.retired,
                                         universe=host.directory.universe())
        except reconfig.ReconfigError as exc:
            self.answer(origin, client, request, exc.code, str(exc))
            return
        if not self.desk.wait_commit(c.work.lsn + 1, origin, client, request):
            self.answer(origin, client, request, reconfig.BUSY, "too many changes waiting")
            return
        record = c.append_config(kind, MemberId(target, 0), now)
        host.emit("elect", now, detail_json(phase=_OP_NAMES[op], target=target,
                                             lsn=record.lsn, client=client))

    def on_committed(self, commit: int, now: float) -> None:
        """On the master: answer the changes the commit point just passed."""
        for lsn, origin, client, request in self.desk.committed(commit):
            q = self.seat.directory
            self.answer(origin, client, request, reconfig.OK,
                        f"committed at log position {lsn}; hosts now "
                        f"{', '.join(q.live() + q.dead()) or 'none'} "
                        f"(quorum {q.quorum()} of {q.universe()})", lsn)

    def answer(self, origin: str, client: str, request: int, code: str, text: str,
               lsn: int = 0) -> None:
        host = self.seat
        result = msg.AdminResult(host.me, client, request, code, text, lsn)
        if origin != host.me:
            host.send_to(origin, result)
        else:
            self.on_result(result)

    def on_result(self, m: msg.AdminResult) -> None:
        """The master's answer to a request this host holds."""
        p = self.desk.answer(m.client, m.request)
        if p is None:
            return
        if p.resent and m.code in (reconfig.ALREADY, reconfig.NOT_RETIRED):
            # Passed to two masters: the first one did it before it went away.
            m = replace(m, code=reconfig.OK, text=f"done ({m.text}: committed before the "
                                                  "master changed)")
        self.out.append((m.client, replace(m, host=self.seat.me)))

    def view(self) -> str:
        """This host's view of the deployment, as one line of JSON (``m2mc host show``)."""
        host = self.seat
        d = host.directory
        master = host.master if host.master and (host.master_alive()) else ""
        return json.dumps({
            "host": host.me, "master": master, "epoch": str(host.epoch),
            "commit": host.commit, "hosts": d.live(), "dead": d.dead(),
            "retired": sorted(host.retired), "quorum": d.quorum(), "of": d.universe(),
            "config_lsn": host.config_lsn}, sort_keys=True)

    # ------------------------------------------------------------ retired hosts
    def refuse(self, src: str, m: msg.BackboneMessage) -> bool:
        """Whether ``m`` comes from a retired host (then it is ignored, and counted);
        a retired host's status is answered by the master with a RetiredNotice."""
        host = self.seat
        retired = host.retired
        if not retired or src == host.me or isinstance(m, msg.AdminResult):
            return False  # (a master that retired itself answers the request last)
        who = claimed_sender(m)
        if src not in retired and who not in retired:
            return False
        host.stats.retired_refused += 1
        c = host.coordinator
        if isinstance(m, msg.Status) and c is not None and m.host in c.work.retired:
            self.notices += 1
            host.send_to(m.host, msg.RetiredNotice(host.me, m.host, host.config_lsn))
        return True

    def on_notice(self, m: msg.RetiredNotice, now: float) -> None:
        """Believed only from the master (the one we follow, or a host whose status
        says it is master): it alone holds the latest configuration."""
        host = self.seat
        if m.target != host.me:
            return
        st = host.directory.status(m.host)
        if m.host == host.master or (st is not None and st.master == m.host):
            self.retire_self(now, f"retired at log position {m.lsn} (told by {m.host})")

    # ------------------------------------------------------------ configuration
    def check_configuration(self, now: float) -> None:
        """Take a newer committed configuration (from records applied or a snapshot)."""
        host = self.seat
        state = host.log.state
        if state.config_lsn <= host.config_lsn:
            return
        host.configure(state.config_lsn, state.retired)
        host.emit("elect", now, detail_json(phase="configuration", lsn=host.config_lsn,
                                             retired=sorted(host.retired),
                                             quorum=host.directory.quorum(),
                                             hosts=host.directory.universe()))
        if host.me in host.retired:
            self.retire_self(now, f"retired at log position {host.config_lsn}")

    def retire_self(self, now: float, why: str) -> None:
        """This host was retired for good: it stops serving (a master first sends the
        commit point, so the others learn of the change from it)."""
        host = self.seat
        if host.retired_self:
            return
        host.stop_serving(why, now)
        host.emit("elect", now, detail_json(phase="retired", why=why))
