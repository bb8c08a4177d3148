"""Every metric m2mc exports, and where each counter of a stats dataclass goes.

:data:`CATALOGUE` names every metric family (its type, its labels beyond ``node``,
what it means and what to alarm on); docs/operations.md lists the same, and a test
keeps the two equal. :data:`TABLES` routes each field of each stats dataclass to a
metric: by default ``<prefix>_<field>_total``, or where a field belongs to a
headline metric (messages dropped, auth failures, ...) to that metric with a
fixed label. A test checks that a scrape shows a metric for every field, so a
counter added to a stats class cannot be forgotten.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from m2mc.group.gjlp import GjlpStats
from m2mc.group.msp import MspStats
from m2mc.group.node_stats import NodeStats
from m2mc.group.reconnect import ReconnectStats
from m2mc.group.repair import RepairStats
from m2mc.group.retention import RetentionStats
from m2mc.group.stream_stats import StreamStats
from m2mc.group.total.seqlog import SeqLogStats
from m2mc.group.window import WindowStats
from m2mc.infra.coordinator import CoordStats
from m2mc.infra.gateway import GatewayStats
from m2mc.infra.host_stats import HostStats
from m2mc.infra.member_events import MemberStats
from m2mc.infra.pieces import PieceStats
from m2mc.infra.wire import WireStats
from m2mc.metrics.catalogue_infra import INFRA_SPECS
from m2mc.metrics.spec import MetricSpec
from m2mc.metrics.spec import counter as _c
from m2mc.metrics.spec import gauge as _g
from m2mc.runtime.daemon import DaemonStats
from m2mc.security.auth import AuthStats
from m2mc.security.ratelimit import RateLimitStats
from m2mc.transport.channel import ChannelStats
from m2mc.transport.router import RouterStats
from m2mc.wire.m2mp import M2MPStats

MAX_GROUP_LABELS = 32
"""Groups that get a ``group`` label value of their own, per node; the others share
:data:`OTHER_GROUPS` (docs/operations.md, "Label cardinality")."""
OTHER_GROUPS = "(other)"


_ALL = "node+member+host+daemon"
_SPECS: list[MetricSpec] = [
    # ----------------------------------------------------------------- every process
    _g("m2mc_up", "1 when this scrape read the counters on the process's event loop; 0 "
       "when the loop did not answer within 5 s (blocked or overloaded)", where=_ALL,
       alarm="== 0 for 1m: the event loop is stuck"),
    _c("m2mc_scrape_connections_refused_total", "connections to the metrics endpoint closed "
       "at once: 8 were being served (a scraper too many, or somebody holding connections "
       "open)", where=_ALL, alarm="rate > 0: who else connects to the metrics port?"),
    _g("m2mc_node_info", "always 1; labels: what runs here (adhoc, member, host, daemon) "
       "and the m2mc version", "mode", "version", where=_ALL),
    _g("m2mc_queue_depth", "entries in a bounded queue or table now (see the queue list)",
       "queue", "group", where=_ALL,
       alarm="m2mc_queue_depth / m2mc_queue_limit > 0.8 for 5m: near its bound"),
    _g("m2mc_queue_limit", "the bound of that queue (what happens at it: docs/security.md)",
       "queue", "group", where=_ALL, combine="max"),
    # ----------------------------------------------------------------- messages
    _c("m2mc_messages_sent_total", "messages the application sent", where="node+member"),
    _c("m2mc_messages_delivered_total", "messages delivered to the application, all groups",
       where="node+member",
       alarm="rate == 0 for 10m while a sender's m2mc_messages_sent_total rises"),
    _c("m2mc_messages_refused_total", "messages an ordering core could not hold (its held "
       "store was full); repair fetches them again later",
       alarm="rate > 0 for 5m: a group cannot keep up (held store at max_held)"),
    _c("m2mc_dropped_total", "group messages or frames dropped, by reason (the list below)",
       "reason", where="node+member",
       alarm="rate by reason: malformed, sender_mismatch, oversized, decode_error > 0 "
             "means somebody sends garbage or forges; unknown_group is normal"),
    _c("m2mc_auth_failures_total", "messages or frames that failed authentication (no tag, "
       "bad tag, replayed, stale, bad auth header)", where="node+member+host",
       alarm="rate > 0: a wrong key, a misconfigured member, or an attack"),
    _c("m2mc_events_dropped_total", "group events dropped because the application did not "
       "read them (max_queued_events)", where="node+member",
       alarm="rate > 0: the application does not read Node.events()"),
    _c("m2mc_status_suppressed_total", "status messages not sent because data covered them"),
    _c("m2mc_rejoins_total", "news of this node's own leave (an earlier incarnation's) "
       "answered by a rejoin"),
    _g("m2mc_groups", "groups by state: member, lingering (left, still answering repairs), "
       "locked (keyed, in the log, no key given), discovered", "state"),
    _c("m2mc_log_evicted_total", "messages evicted from the group logs by retention "
       "(retention_age, retention_bytes, memory_log_bytes): dropped whole, or kept as ids"),
    _c("m2mc_reconnects_total", "reactions to coming back into range (discovery, "
       "re-announcement, MSP), by what told: interface (the link watcher or "
       "Node.network_changed()) or silence (others heard again after a silence)", "reason",
       alarm="rate > 1/min for 10m: a flapping link or radio"),
    _c("m2mc_reconnects_held_total", "back-in-range signals ignored: within "
       "reconnect_holdoff of the last reaction"),
    _c("m2mc_reconnect_advs_suppressed_total", "reaction advertisements left out: another "
       "node's was heard first"),
    _c("m2mc_reconnect_advs_repeated_total", "reaction advertisements made again: no "
       "discovery reply heard after the last"),
    _c("m2mc_groups_reannounced_total", "groups this node created, announced again after "
       "it came back"),
    # ----------------------------------------------------------------- per group
    _g("m2mc_group_info", "1 per group (for group \"(other)\": how many groups it stands "
       "for); labels: order, keyed, state", "group", "order", "keyed", "state"),
    _g("m2mc_group_members", "current members of the group", "group"),
    _c("m2mc_group_messages_delivered_total", "messages of the group delivered here", "group"),
    _c("m2mc_group_messages_refused_total", "messages of the group refused at a bound, by "
       "reason: held_full (ordering core), unstamped_full and stamps_full (total order)",
       "group", "reason", alarm="rate > 0 for 5m"),
    _c("m2mc_group_duplicates_total", "copies of messages already held or delivered", "group"),
    _c("m2mc_group_members_refused_total", "membership entries refused: the group's "
       "membership table was full (max_members)", "group", alarm="rate > 0"),
    _g("m2mc_group_holdoff_senders", "senders whose NACKs were overheard (repair hold-off)",
       "group"),
    _c("m2mc_group_repair_nacks_sent_total", "NACKs this node sent", "group",
       alarm="rate high relative to m2mc_group_messages_delivered_total: a lossy medium"),
    _c("m2mc_group_repair_nacks_suppressed_total", "NACKs not sent: another member's NACK "
       "asked the same", "group"),
    _c("m2mc_group_repair_nacks_received_total", "NACKs received", "group"),
    _c("m2mc_group_repair_retransmitted_total", "messages retransmitted (repairs sent)",
       "group"),
    _c("m2mc_group_repair_repairs_suppressed_total", "repairs not sent: a copy went by first",
       "group"),
    _c("m2mc_group_repair_repairs_refused_total", "NACKs that asked for more than the repair "
       "table had room for (max_pending_repairs)", "group", alarm="rate > 0"),
    _c("m2mc_group_repair_absurd_high_water_total", "high-waters absurdly far ahead "
       "(max_seq_jump): dropped", "group", alarm="rate > 0: a broken or hostile sender"),
    _c("m2mc_group_repair_absurd_seq_total", "sequence numbers at or above max_seq: dropped",
       "group", alarm="rate > 0: a broken or hostile sender"),
    _c("m2mc_group_repair_senders_refused_total", "records of senders beyond max_senders: "
       "dropped", "group", alarm="rate > 0"),
    _c("m2mc_group_repair_nack_intervals_ignored_total", "intervals of a NACK past "
       "max_nack_intervals", "group"),
    _c("m2mc_group_repair_holdoffs_refused_total", "overheard NACK ranges of senders past "
       "the hold-off bound", "group"),
    _c("m2mc_group_repair_status_truncated_total", "own status messages cut to "
       "max_status_senders high-waters", "group"),
    _c("m2mc_group_repair_status_entries_ignored_total", "high-waters of a received status "
       "past max_status_senders", "group"),
    _c("m2mc_group_repair_holder_nacks_total", "NACKs made at once because a member's sync "
       "request named messages this node lacked (catching up both ways)", "group"),
    _c("m2mc_group_window_blocks_total", "times this node's send window filled and sends "
       "waited for the members to read (receiver-paced flow control)", "group",
       alarm="rate high: a member reads slower than this node sends"),
    _c("m2mc_group_window_laggards_total", "members the send window stopped waiting for: "
       "no acknowledgement for send_window_wait", "group"),
    _c("m2mc_group_msp_requests_sent_total", "MSP sync requests sent (catching up after a "
       "join or restart)", "group"),
    _c("m2mc_group_msp_requests_answered_total", "MSP sync requests received and answered",
       "group"),
    _c("m2mc_group_msp_responses_sent_total", "MSP sync responses sent", "group"),
    _c("m2mc_group_msp_responses_suppressed_total", "responses not sent: another member "
       "answered", "group"),
    _c("m2mc_group_msp_stale_discarded_total", "requests or responses of an older sync",
       "group"),
    _c("m2mc_group_msp_mirs_refused_total", "sync requests refused: max_mirs being answered",
       "group", alarm="rate > 0: many members catching up at once"),
    _c("m2mc_group_msp_requests_refused_total", "sync requests from processes that are not "
       "members", "group"),
    _c("m2mc_group_msp_requests_admitted_late_total", "refused requests answered once the "
       "requester's JOIN came", "group"),
    _c("m2mc_group_msp_responses_ignored_total", "responses to requests of non-members",
       "group"),
    _c("m2mc_group_msp_sync_truncated_total", "sync series cut at max_sync_messages or "
       "max_sync_bytes", "group"),
    _c("m2mc_group_msp_digests_truncated_total", "digests cut to max_digest_intervals",
       "group"),
    _c("m2mc_group_msp_messages_sent_total", "messages sent inside sync responses", "group"),
    _c("m2mc_group_msp_requests_ahead_total", "sync requests of members that hold messages "
       "this node lacks (it NACKs them at once)", "group"),
    _c("m2mc_group_gone_sent_total", "GONE answers sent: messages asked for that this node's "
       "log no longer holds (retention evicted them)", "group"),
    _c("m2mc_group_gone_suppressed_total", "GONE answers not sent: another member's GONE said "
       "it first", "group"),
    _c("m2mc_group_gone_truncated_total", "GONE answers cut at max_nack_intervals (the rest "
       "goes with the next NACK)", "group"),
    _c("m2mc_group_gone_received_total", "GONE messages heard: members asked for messages "
       "some logs no longer hold", "group",
       alarm="rate > 0 for 10m: members stay away longer than the retention covers"),
    _c("m2mc_group_gone_contradicted_total", "GONEs naming messages this node holds: it sent "
       "them", "group"),
    _c("m2mc_group_gone_reports_dropped_total", "GONE reports past their table's bound "
       "(max_senders senders, 4 x max_nack_intervals ranges each)", "group",
       alarm="rate > 0: a flood of GONEs (a broken or hostile member)"),
    _c("m2mc_group_messages_skipped_total", "messages given up: gone from every log that "
       "answered within gone_grace (lost to this node; a MessagesSkipped event)", "group",
       alarm="increase > 0: messages lost here; retention shorter than the absences"),
    _c("m2mc_group_positions_skipped_total", "total order: positions passed over whose "
       "message no log holds any more", "group", alarm="increase > 0 (as above)"),
    _c("m2mc_group_skips_deferred_total", "retention ids mode: skipped messages waiting for "
       "their parent's place in the order", "group"),
    _c("m2mc_group_seqlog_absurd_epoch_total", "total order: ballots absurdly far ahead, "
       "dropped", "group", alarm="rate > 0"),
    _c("m2mc_group_seqlog_absurd_position_total", "total order: positions absurdly far "
       "ahead, dropped", "group", alarm="rate > 0"),
    _c("m2mc_group_seqlog_not_member_total", "total order: ballots of non-members, dropped",
       "group"),
    _c("m2mc_group_seqlog_stale_total", "total order: messages of a ballot older than our "
       "promise", "group"),
    _c("m2mc_group_seqlog_prepares_total", "total order: candidacies started here", "group"),
    _c("m2mc_group_seqlog_takeovers_total", "total order: ballots this node started leading "
       "(sequencer changes)", "group", alarm="rate > 1/min: the sequencer keeps changing"),
    _c("m2mc_group_seqlog_handovers_total", "total order: sequencer handovers", "group"),
    _c("m2mc_group_seqlog_config_records_total", "total order: membership records proposed "
       "here", "group"),
    _c("m2mc_group_seqlog_conflicts_total", "total order: two entries decided at one "
       "position (never, among honest members)", "group", alarm="> 0: page someone"),
    _c("m2mc_group_seqlog_log_full_total", "total order: stamps not proposed, "
       "max_uncommitted out", "group", alarm="rate > 0 for 5m: no majority reachable"),
    # ----------------------------------------------------------------- authentication
    _c("m2mc_auth_sealed_total", "messages or frames sealed with the key", "group",
       where="node+member+host"),
    _c("m2mc_auth_opened_total", "messages or frames whose tag verified", "group",
       where="node+member+host"),
    _c("m2mc_auth_refused_total", "messages or frames refused by the key check, by reason: "
       "malformed, unknown_key, bad_tag, replayed, stale, unauthenticated", "group", "reason",
       where="node+member+host", alarm="rate > 0 (see m2mc_auth_failures_total)"),
    _c("m2mc_auth_sender_evictions_total", "senders dropped from the replay table "
       "(max_senders / max_auth_senders)", "group", where="node+member+host"),
    # ----------------------------------------------------------------- rate limits
    _c("m2mc_rate_limit_allowed_total", "control messages a rate limiter let through",
       "limiter", where="node+host"),
    _c("m2mc_rate_limited_total", "control messages refused by a rate limiter, by bucket: "
       "sender (its own) or total (all senders)", "limiter", "bucket", where="node+host",
       alarm="rate > 0 for 5m: a flood of control messages"),
    _c("m2mc_rate_limit_evictions_total", "token buckets dropped (the least recently heard "
       "senders)", "limiter", where="node+host"),
    # ----------------------------------------------------------------- discovery (GJLP)
    _c("m2mc_discovery_advertisements_sent_total", "advertisements sent"),
    _c("m2mc_discovery_advertisements_heard_total", "advertisements of other processes heard"),
    _c("m2mc_discovery_replies_sent_total", "group information replies sent"),
    _c("m2mc_discovery_replies_suppressed_total", "replies not sent: another process answered"),
    _c("m2mc_discovery_replies_heard_total", "group information replies heard"),
    _c("m2mc_discovery_groups_dropped_total", "discovered groups not kept: max_groups known",
       alarm="rate > 0: somebody announces very many groups"),
    _c("m2mc_discovery_order_conflicts_total", "announcements of a known group with another "
       "order"),
    _c("m2mc_discovery_keyed_members_ignored_total", "unauthenticated news about members of "
       "keyed groups, ignored"),
    _c("m2mc_discovery_names_relayed_total", "members' display names taken from discovery "
       "replies (their own word not heard yet)"),
    _c("m2mc_discovery_unknown_group_advs_total", "advertisements sent because messages of "
       "a group never described to this node arrived (its announcements were missed)",
       alarm="rate > 1/min for 10m: someone sends with tags of no group (or a bug)"),
    _c("m2mc_discovery_unknown_group_advs_suppressed_total", "such advertisements left out: "
       "another node's came first"),
    # ----------------------------------------------------------------- M2MP and channel
    _c("m2mc_m2mp_packets_in_total", "M2MP packets received"),
    _c("m2mc_m2mp_packets_out_total", "M2MP packets sent (each copy counts)"),
    _c("m2mc_m2mp_bytes_in_total", "bytes of M2MP packets received"),
    _c("m2mc_m2mp_bytes_out_total", "bytes of M2MP packets sent"),
    _c("m2mc_m2mp_malformed_total", "datagrams that are no M2MP packet, dropped",
       alarm="rate > 0: something else sends on this channel"),
    _c("m2mc_m2mp_duplicates_total", "packet copies already seen (redundancy makes these)"),
    _c("m2mc_m2mp_looped_back_total", "own packets coming back from the medium"),
    _c("m2mc_m2mp_messages_in_total", "M2MP messages reassembled"),
    _c("m2mc_m2mp_messages_out_total", "M2MP messages sent"),
    _c("m2mc_m2mp_filtered_out_total", "messages no filter wanted (other applications)"),
    _c("m2mc_m2mp_abandoned_total", "messages given up before complete, by reason: timeout, "
       "bound, too_large, malformed, gap (a stream's packet lost for good), overflow (a "
       "stream's reader fell behind)", "reason",
       alarm="rate(reason=timeout) > 0 for 5m: loss on the medium; bound: reassembly full"),
    _c("m2mc_m2mp_flow_timeouts_total", "packets released after flow_timeout without their "
       "loopback"),
    _c("m2mc_m2mp_loopbacks_missed_total", "packets released early: a later packet's copy "
       "came back first"),
    _c("m2mc_m2mp_filtered_fragments_total", "further packets of filtered messages"),
    _c("m2mc_m2mp_streams_in_total", "M2MP messages read as streams (stream_threshold)"),
    _c("m2mc_stream_sent_total", "group messages this node sent as streams"),
    _c("m2mc_stream_received_total", "streamed messages' bodies received whole and checked"),
    _c("m2mc_stream_failed_total", "bodies that will never be complete here (timeout, "
       "aborted, corrupt, malformed, store_full)",
       alarm="rate > 0: senders gone mid-stream, or a store too small"),
    _c("m2mc_stream_chunks_sent_total", "chunks of this node's streams sent"),
    _c("m2mc_stream_chunks_received_total", "chunks of others' streams received"),
    _c("m2mc_stream_chunk_duplicates_total", "chunks received again (repairs for others)"),
    _c("m2mc_stream_chunks_refused_total", "chunks past a stream's window (asked for again)"),
    _c("m2mc_stream_refused_total", "chunks of new streams past max_streams or of "
       "non-members"),
    _c("m2mc_stream_nacks_sent_total", "STREAM_NACKs this node sent",
       alarm="rate high relative to m2mc_stream_chunks_received_total: a lossy medium"),
    _c("m2mc_stream_acks_sent_total", "STREAM_ACKs this node sent: how far it holds a "
       "body in order, for the body's sender"),
    _c("m2mc_stream_paced_total", "times a stream this node sends waited for its slowest "
       "receiver"),
    _c("m2mc_stream_laggards_total", "receivers a stream's sender stopped waiting for: "
       "silent for 2 * send_window_wait", alarm="rising: members crashed or gone, or "
       "older nodes that never acknowledge"),
    _c("m2mc_stream_nacks_suppressed_total", "STREAM_NACKs held off: another member asked"),
    _c("m2mc_stream_chunks_repaired_total", "chunks this node sent again for others"),
    _c("m2mc_stream_repairs_suppressed_total", "chunk repairs left out: another member "
       "sent them first"),
    _c("m2mc_stream_repairs_refused_total", "chunks asked for past max_stream_repairs"),
    _c("m2mc_stream_store_full_total", "bodies the body store could not hold "
       "(stream_store_bytes)"),
    _c("m2mc_channel_datagrams_in_total", "datagrams the channel received",
       where="node+daemon"),
    _c("m2mc_channel_datagrams_out_total", "datagrams the channel sent", where="node+daemon"),
    _c("m2mc_channel_dropped_inbound_total", "datagrams dropped: the channel's inbox was full",
       where="node+daemon", alarm="rate > 0 for 5m: the process cannot keep up"),
    _c("m2mc_channel_send_errors_total", "datagrams the OS refused to send",
       where="node+daemon", alarm="rate > 0: a network or interface problem"),
    _c("m2mc_channel_dropped_paused_total", "datagrams dropped while the application was not "
       "reading (max_queued_messages reached)", alarm="rate > 0: a slow application"),
    *INFRA_SPECS,
    # ----------------------------------------------------------------- daemon
    _c("m2mc_daemon_from_clients_total", "datagrams from local processes", where="daemon"),
    _c("m2mc_daemon_from_network_total", "datagrams from the external channel",
       where="daemon"),
    _c("m2mc_daemon_malformed_total", "datagrams that are no M2MP packet by size, dropped",
       where="daemon", alarm="rate > 0"),
    _c("m2mc_daemon_own_loopback_total", "own sends coming back from the network, dropped",
       where="daemon"),
    _c("m2mc_daemon_clients_refused_total", "connections refused beyond max_clients",
       where="daemon", alarm="rate > 0"),
    _c("m2mc_daemon_clients_connected_total", "connections of local processes accepted",
       where="daemon"),
    _c("m2mc_daemon_client_overflow_total", "datagrams dropped for a slow local process "
       "(max_client_buffer)", where="daemon", alarm="rate > 0 for 5m"),
    _c("m2mc_daemon_external_overflow_total", "datagrams dropped: the external channel was "
       "backlogged (max_external_backlog)", where="daemon", alarm="rate > 0 for 5m"),
]

CATALOGUE: dict[str, MetricSpec] = {s.name: s for s in _SPECS}


@dataclass(frozen=True, slots=True)
class Route:
    """Where one stats field goes: a metric and fixed label values (``key`` labels the
    keys of a dict-valued field, such as ``M2MPStats.abandoned`` by reason)."""

    metric: str
    labels: tuple[tuple[str, str], ...] = ()
    key: str | None = None
    keys: tuple[str, ...] = ()  # values of ``key`` exported (as 0) before they occur


@dataclass(frozen=True, slots=True)
class StatsTable:
    """The routes of one stats dataclass: ``<prefix>_<field>_total`` unless overridden."""

    cls: type
    prefix: str
    overrides: dict[str, tuple[Route, ...]] = field(default_factory=dict)
    # Not exported: "extra" (reserved, never written), or a field that is the sum of
    # others exported with a label (Prometheus sums them).
    skip: frozenset[str] = frozenset({"extra"})

    def routes(self, name: str) -> tuple[Route, ...]:
        if name in self.skip:
            return ()
        return self.overrides.get(name) or (Route(f"{self.prefix}_{name}_total"),)

    def fields(self) -> list[str]:
        return [f.name for f in fields(self.cls) if f.name not in self.skip]


def _reason(metric: str, reason: str) -> tuple[Route, ...]:
    return (Route(metric, (("reason", reason),)),)


_DROPPED = "m2mc_dropped_total"
_NODE_DROPS = ("malformed", "unknown_group", "wrong_kind", "own_echo", "duplicates",
               "malformed_records", "abandoned", "oversized", "sealed_refused",
               "sender_mismatch", "rate_limited")
_AUTH_REASONS = ("malformed", "unknown_key", "bad_tag", "replayed", "stale", "unauthenticated")

NODE = StatsTable(NodeStats, "m2mc", {
    "sent": (Route("m2mc_messages_sent_total"),),
    "delivered": (Route("m2mc_messages_delivered_total"),),
    "refused": (Route("m2mc_messages_refused_total"), Route(_DROPPED, (("reason", "refused"),))),
    "auth_failed": (Route("m2mc_auth_failures_total"),
                    Route(_DROPPED, (("reason", "auth_failed"),))),
    "status_suppressed": (Route("m2mc_status_suppressed_total"),),
    "refuted": (Route("m2mc_rejoins_total"),),
    **{name: _reason(_DROPPED, name) for name in _NODE_DROPS},
})
GJLP = StatsTable(GjlpStats, "m2mc_discovery")
REPAIR = StatsTable(RepairStats, "m2mc_group_repair")
WINDOW = StatsTable(WindowStats, "m2mc_group")
MSP = StatsTable(MspStats, "m2mc_group_msp")
RETENTION = StatsTable(RetentionStats, "m2mc_group", {
    "skipped": (Route("m2mc_group_messages_skipped_total"),),
    "skipped_positions": (Route("m2mc_group_positions_skipped_total"),),
})
RECONNECT = StatsTable(ReconnectStats, "m2mc", {
    "reconnects_by_interface": (Route("m2mc_reconnects_total", (("reason", "interface"),)),),
    "reconnects_by_silence": (Route("m2mc_reconnects_total", (("reason", "silence"),)),),
}, skip=frozenset({"reconnects"}))  # the sum of the two above: sum by (reason)
SEQLOG = StatsTable(SeqLogStats, "m2mc_group_seqlog")
AUTH = StatsTable(AuthStats, "m2mc_auth", {
    name: _reason("m2mc_auth_refused_total", name) for name in _AUTH_REASONS})
RATE_LIMIT = StatsTable(RateLimitStats, "m2mc_rate_limit", {
    "limited": (Route("m2mc_rate_limited_total", (("bucket", "sender"),)),),
    "limited_total": (Route("m2mc_rate_limited_total", (("bucket", "total"),)),),
})
M2MP = StatsTable(M2MPStats, "m2mc_m2mp", {
    "abandoned": (Route("m2mc_m2mp_abandoned_total", key="reason",
                        keys=("timeout", "bound", "too_large", "malformed", "gap",
                              "overflow")),)})
STREAM = StatsTable(StreamStats, "m2mc")
CHANNEL = StatsTable(ChannelStats, "m2mc_channel")
MEMBER = StatsTable(MemberStats, "m2mc_member", {
    "delivered": (Route("m2mc_messages_delivered_total"),),
    "duplicates": _reason(_DROPPED, "duplicates"),
    "decode_errors": _reason(_DROPPED, "decode_error"),
    "nacks": (Route("m2mc_member_nacks_total"),),
    "resumed": (Route("m2mc_member_resumes_total", (("outcome", "resumed"),)),),
    "resumes_refused": (Route("m2mc_member_resumes_total", (("outcome", "refused"),)),),
    "restore_discarded": (Route("m2mc_member_resumes_total", (("outcome", "discarded"),)),),
})
WIRE = StatsTable(WireStats, "m2mc_frames", {
    "decoded": (Route("m2mc_frames_decoded_total"),),
    **{name: _reason("m2mc_frames_refused_total", name)
       for name in ("malformed", "unkeyed_sealed", "wrong_sender", "misdirected")},
})
PIECES = StatsTable(PieceStats, "m2mc_frames", {
    "cut": (Route("m2mc_frames_in_pieces_total"),),
    "frames": (Route("m2mc_frames_put_together_total"),),
    "pieces": (Route("m2mc_pieces_received_total"),),
    "malformed": (Route("m2mc_pieces_refused_total"),),
    "expired": _reason("m2mc_partial_frames_given_up_total", "timeout"),
    "evicted": _reason("m2mc_partial_frames_given_up_total", "bounds"),
})
HOST = StatsTable(HostStats, "m2mc_host")
GATEWAY = StatsTable(GatewayStats, "m2mc_gateway")
COORDINATOR = StatsTable(CoordStats, "m2mc_coordinator")
ROUTER = StatsTable(RouterStats, "m2mc_daemon")
DAEMON = StatsTable(DaemonStats, "m2mc_daemon")

TABLES: tuple[StatsTable, ...] = (NODE, GJLP, REPAIR, WINDOW, MSP, RETENTION, RECONNECT,
                                  SEQLOG, AUTH, RATE_LIMIT, M2MP, STREAM, CHANNEL, MEMBER,
                                  WIRE, PIECES, HOST, GATEWAY, COORDINATOR, ROUTER, DAEMON)
AUTH_REFUSALS = _AUTH_REASONS
"""The AuthStats fields that are refusals: their sum is ``m2mc_auth_failures_total``
of an infrastructure-mode process."""

QUEUES: dict[str, str] = {
    "app_messages": "ad hoc, member: per group, delivered messages the application has not "
                    "read (max_queued_messages; at it an ad hoc node stops reading the "
                    "network, a member stops delivering, until the application read half)",
    "app_events": "ad hoc, member: group events not read (max_queued_events; oldest dropped)",
    "held": "ad hoc: per group, messages held by the ordering core until deliverable "
            "(max_held; beyond, refused)",
    "unstamped": "ad hoc: per total-order group, data waiting for its sequence number "
                 "(max_unstamped; send() raises BufferFullError at it)",
    "pending_repairs": "ad hoc: per group, retransmissions waiting for their back-off "
                       "(max_pending_repairs)",
    "mirs": "ad hoc: per group, sync requests being answered (max_mirs)",
    "send_backlog": "ad hoc: packets queued in M2MP plus unsent records (send_backlog; "
                    "send() waits at it)",
    "send_backlog_bytes": "ad hoc: bytes of the packets queued in M2MP plus the unsent "
                          "records (send_backlog_bytes; send() waits at it)",
    "known_groups": "ad hoc: groups joined plus discovered (max_groups; more are not kept)",
    "partial_bytes": "ad hoc: bytes of partly reassembled M2MP messages (max_partial_bytes)",
    "streams_open": "ad hoc: streamed messages' bodies being received (max_streams)",
    "stream_store": "ad hoc: bytes of bodies in the body store (stream_store_bytes; the "
                    "oldest complete ones evicted)",
    "pending_sends": "member: own messages not yet seen sequenced (max_pending_sends)",
    "hosts": "host: hosts in the directory (max_hosts)",
    "local": "host: computers heard in the cell (max_local)",
    "forward": "host: member requests waiting to be sequenced (max_forward_queue)",
    "queued_requests": "host: requests held during a takeover (max_queued_requests)",
    "members": "host, on the master: members of the group (max_members)",
    "admin_requests": "host: operators' retire/readmit requests it is answering "
                      "(max_admin_requests; beyond, answered busy)",
    "clients": "daemon: local processes connected (max_clients)",
    "external_backlog": "daemon: datagrams waiting for the external channel "
                        "(max_external_backlog)",
}
