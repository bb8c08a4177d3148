"""Total order: persistence -- what of the sequencing log goes to the store, and
how it comes back after a restart (docs/group.md section 5, "Restart").

Rules:

- Durable: the promise (``promised``), the ballot the log is synced to with its
  base and commit point, the candidacy's and the newest epoch, the log's
  uncommitted entries (``dumps``: small), and, apart, the decided membership
  records (``dumps_conf``: written only when one is added). Everything else is
  volatile and rebuilt from these.
- Both are written (``save_log``, store meta ``tlog/<gid>`` and
  ``tlog/<gid>/conf``) only when they changed, and before any datagram leaves:
  a promise is never forgotten once someone could have seen it.
- ``restore`` reloads them; positions below the first one not delivered here are
  not handed out again, the others (committed records and entries) are.
- A node restarted with its own ballot promised tries to lead again at once
  (``resume``, the role policy).
"""

from __future__ import annotations

import json
from typing import Any

from m2mc.group.messages import LogEntry, MemberEntry
from m2mc.group.total.core import LogCore
from m2mc.ordering import MessageId
from m2mc.store import GroupStore

LOG_META = "tlog/"  # store meta key prefix: "tlog/<gid>" = the sequencing log (JSON)
CONF_META = "/conf"  # "tlog/<gid>/conf": its decided membership records (JSON)


def _entry_json(pos: int, e: LogEntry) -> list[Any]:
    if isinstance(e, MemberEntry):
        return [pos, e.pid, e.version, e.joined]
    return [pos, e.pid, e.seq]


def _entry_of(raw: list[Any]) -> tuple[int, LogEntry]:
    if len(raw) == 4:
        return int(raw[0]), MemberEntry(str(raw[1]), int(raw[2]), bool(raw[3]))
    return int(raw[0]), MessageId(str(raw[1]), int(raw[2]))


class Persistence:
    """The durable state's encoding (module docstring)."""

    __slots__ = ("_pid_json", "core")

    def __init__(self, core: LogCore) -> None:
        self.core = core
        self._pid_json: dict[str, str] = {}  # a pid as JSON (a cache, bounded)

    def dumps(self) -> str:
        """The durable state but the membership records (small: the uncommitted log).

        The text is what ``json.dumps`` of the state with ``_entry_json`` entries
        and separators ``(",", ":")`` gives, byte for byte, the entries written
        directly: it is written at every output that follows a change (a full
        window is 1,024 entries; through the encoder it was a twentieth of a
        member's time in a stream of small messages)."""
        core = self.core
        core.dirty = False
        head = json.dumps({
            "promised": list(core.promised), "ballot": list(core.ballot), "base": core.base,
            "commit": core.commit_b, "cand": core.cand_epoch, "max": core.max_epoch,
        }, separators=(",", ":"))
        log = core.log
        pid_json = self._pid_json
        if len(pid_json) > 1024:
            pid_json.clear()
        parts: list[str] = []
        for pos in sorted(log):
            e = log[pos]
            pj = pid_json.get(e.pid)
            if pj is None:
                pj = pid_json[e.pid] = json.dumps(e.pid)
            if type(e) is MessageId:
                parts.append(f"[{pos},{pj},{e.seq}]")
            else:
                parts.append(json.dumps(_entry_json(pos, e), separators=(",", ":")))
        return f'{head[:-1]},"log":[{",".join(parts)}]}}'

    def dumps_conf(self) -> str:
        """The decided membership records (written only when one is added)."""
        core = self.core
        core.conf_dirty = False
        return json.dumps([_entry_json(p, e) for p, e in sorted(core.conf.items())],
                          separators=(",", ":"))

    def restore(self, blob: str | None, start: int, conf_blob: str | None = None) -> None:
        """Reload the durable state; positions below ``start`` were delivered here."""
        core = self.core
        if blob:
            d = json.loads(blob)
            core.promised = (int(d["promised"][0]), str(d["promised"][1]))
            core.ballot = (int(d["ballot"][0]), str(d["ballot"][1]))
            core.base = int(d["base"])
            core.commit_b = int(d["commit"])
            core.cand_epoch = int(d["cand"])
            core.max_epoch = int(d["max"])
            core.set_log(dict(_entry_of(r) for r in d["log"]))
        if conf_blob:
            core.conf = {p: e for p, e in (_entry_of(r) for r in json.loads(conf_blob))
                         if type(e) is MemberEntry}
            core.conf_sorted = None
        core.emitted = max(0, start - 1)
        core.known = max(core.base, core.commit_b, core.emitted)
        core.max_ballot = max(core.promised, core.ballot)
        core.resume = core.promised[1] == core.pid
        core.set_log(core.log)
        core.recompute_high()
        for pos, entry in sorted(core.conf.items()):
            if pos >= start:
                core.decide(pos, entry)
        for pos in sorted(p for p in core.log if start <= p <= core.commit_b):
            core.decide(pos, core.log[pos])

    def save_log(self, store: GroupStore, gid: str) -> None:
        """Write the sequencing log if it changed (before any datagram leaves)."""
        core = self.core
        if core.dirty:
            store.set_meta(LOG_META + gid, self.dumps())
        if core.conf_dirty:
            store.set_meta(LOG_META + gid + CONF_META, self.dumps_conf())

    def load_log(self, store: GroupStore, gid: str, start: int) -> None:
        """Reload what :meth:`save_log` wrote; positions below ``start`` were delivered."""
        self.restore(store.get_meta(LOG_META + gid), start,
                     store.get_meta(LOG_META + gid + CONF_META))
