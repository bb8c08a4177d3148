"""The metrics of infrastructure mode's members and hosts (part of
:data:`m2mc.metrics.catalogue.CATALOGUE`, which docs/operations.md lists)."""

from __future__ import annotations

from m2mc.metrics.spec import MetricSpec
from m2mc.metrics.spec import counter as _c
from m2mc.metrics.spec import gauge as _g

INFRA_SPECS: list[MetricSpec] = [
    # ----------------------------------------------------------------- infra member
    _c("m2mc_member_nacks_total", "NACKs this member sent", where="member"),
    _c("m2mc_member_buffer_evictions_total", "records evicted from the member's buffer",
       where="member"),
    _c("m2mc_member_resent_news_total", "own messages resent (not seen sequenced in time)",
       where="member"),
    _c("m2mc_member_dummies_refused_total", "bridges longer than max_dummies (filled by NACK "
       "instead)", where="member"),
    _c("m2mc_member_moves_total", "cells this member moved to (the first counts)",
       where="member", alarm="rate > 1/min: hosts keep going silent or balancing"),
    _c("m2mc_member_bad_addresses_total", "gateway addresses outside the allowed scope, "
       "never sent to", where="member", alarm="rate > 0"),
    _g("m2mc_member_phase", "1 for the member's phase: idle, joining, member, leaving, "
       "closing, left", "phase", where="member"),
    _c("m2mc_member_uplink_mismatch_total", "beacons naming another uplink than the address "
       "they came from: not followed", where="member",
       alarm="rate > 0: forged beacons, or a gateway behind address translation"),
    _c("m2mc_member_resumes_total", "power-ons with a saved membership (data_dir), by "
       "outcome: resumed, refused (the hosts expelled it while off: joined afresh, what was "
       "sequenced meanwhile is lost to it), discarded (the saved state was unusable)",
       "outcome", where="member",
       alarm="increase(outcome!=\"resumed\") > 0: messages missed over a "
             "switch-off"),
    _c("m2mc_member_sequence_lost_total", "memberships ended because every host lost its "
       "state at once (hosts without --data-dir): the beacons named a new sequence; what the "
       "old one held beyond the member's last delivery is lost to it, and it joined again",
       where="member", alarm="increase > 0: run the hosts with --data-dir"),
    _c("m2mc_member_commits_total", "saves of the member's state (data_dir) before frames "
       "or events left", where="member"),
    _c("m2mc_member_delivery_pauses_total", "times the member stopped taking records: the "
       "application's queue reached max_queued_messages (NACKed again after it read half)",
       where="member", alarm="rate > 0 for 5m: the application does not keep up"),
    _c("m2mc_member_other_groups_total", "messages of groups this member is not in, passed over "
       "(one order for every group)", where="member"),
    _c("m2mc_member_groups_refused_total", "joins of a group the coordinator refused (max_groups, "
       "max_member_groups, a bad name)", where="member", alarm="rate > 0"),
    _c("m2mc_member_sends_refused_total", "messages the coordinator did not sequence: this member "
       "was not in their group", where="member", alarm="rate > 0"),
    _c("m2mc_member_catchups_total", "returns after an expulsion (away longer than member_timeout) "
       "caught up from the hosts' log", where="member"),
    _c("m2mc_member_caught_up_total", "messages those catch-ups delivered", where="member"),
    _c("m2mc_member_lost_total", "messages of this member's groups it will never get: the hosts' "
       "retention dropped them while it was away",
       where="member", alarm="increase > 0: a member away longer than the hosts' retention"),
    _c("m2mc_member_history_requests_total", "history requests sent (again included)",
       where="member"),
    _c("m2mc_member_history_records_total", "records the history answers brought", where="member"),
    _c("m2mc_frames_decoded_total", "infrastructure frames decoded", where="member+host"),
    _c("m2mc_frames_in_pieces_total", "cell frames larger than one packet of the MTU, sent in "
       "pieces", where="member+host"),
    _c("m2mc_frames_put_together_total", "cell frames put together from their pieces",
       where="member+host"),
    _c("m2mc_pieces_received_total", "pieces of cell frames received (copies included)",
       where="member+host"),
    _c("m2mc_pieces_refused_total", "malformed pieces of cell frames, dropped",
       where="member+host", alarm="rate > 0: garbage on the cell"),
    _c("m2mc_partial_frames_given_up_total", "cell frames whose pieces did not all arrive, by "
       "reason: timeout (2 s), bounds (pushed out by newer ones); a frame lost, repaired as "
       "any", "reason", where="member+host"),
    _c("m2mc_frames_refused_total", "infrastructure frames refused, by reason: malformed, "
       "unkeyed_sealed, wrong_sender, misdirected", "reason", where="member+host",
       alarm="rate > 0: garbage, a keyed frame in an unkeyed deployment, or a forgery"),
    # ----------------------------------------------------------------- infra host
    _g("m2mc_host_master", "1, labelled with the master host this host follows (absent: none "
       "known)", "master", where="host"),
    _g("m2mc_host_has_master", "1 when a live master is known, else 0", where="host",
       alarm="== 0 for 10s: no coordinator, nothing is sequenced"),
    _g("m2mc_host_is_master", "1 when this host is the active coordinator", where="host",
       alarm="sum over hosts != 1 for 30s"),
    _g("m2mc_host_epoch", "round of the current master's epoch (grows with each election "
       "won)", where="host"),
    _c("m2mc_host_elections_total", "elections this host took part in (started or joined)",
       where="host", alarm="increase > 3 in 10m: masters keep failing"),
    _g("m2mc_host_hosts_live", "hosts alive in the directory, this one included (retired "
       "ones not)", where="host",
       alarm="< m2mc_host_configuration_hosts for 1m: a host is down"),
    _g("m2mc_host_cell_members", "members attached to this host's cell", where="host"),
    _g("m2mc_host_commit", "commit point (gseq) known to this host", where="host"),
    _g("m2mc_host_log_high", "highest log record this replica holds", where="host"),
    _c("m2mc_host_log_refused_total", "replicated records that did not apply (never from an "
       "honest master)", where="host", alarm="> 0"),
    _c("m2mc_host_bad_addresses_total", "addresses from the network outside the allowed "
       "scope, never sent to", where="host", alarm="rate > 0"),
    _c("m2mc_host_backbone_refused_connections_total", "backbone connections refused "
       "(max_backbone_connections)", where="host", alarm="rate > 0"),
    _c("m2mc_host_backbone_bad_streams_total", "backbone connections closed for a bad "
       "stream", where="host", alarm="rate > 0"),
    _c("m2mc_host_decode_errors_total", "frames this host could not decode or authenticate",
       where="host", alarm="rate > 0"),
    _c("m2mc_host_elections_started_total", "elections this host started", where="host"),
    _c("m2mc_host_takeovers_total", "takeovers (this host became the coordinator)",
       where="host"),
    _c("m2mc_host_queued_dropped_total", "requests dropped while a takeover held them "
       "(max_queued_requests)", where="host", alarm="rate > 0"),
    _c("m2mc_host_hosts_refused_total", "statuses of new hosts while the directory was full "
       "(max_hosts)", where="host", alarm="rate > 0"),
    _c("m2mc_host_bad_takeovers_total", "takeover answers whose logs did not apply",
       where="host", alarm="> 0"),
    _c("m2mc_host_unknown_host_total", "votes and answers from hosts never admitted",
       where="host", alarm="rate > 0"),
    _c("m2mc_host_untrusted_addresses_total", "backbone addresses in statuses that nobody "
       "trusted gave (no configured peer, no key, no connection from there): never "
       "connected to", where="host", alarm="rate > 0: forged statuses"),
    _c("m2mc_host_retired_refused_total", "frames from hosts retired for good, ignored",
       where="host", alarm="rate > 0 for 5m: a retired host still runs (stop it)"),
    _c("m2mc_host_saves_total", "commits of a durable host's promise and log to its "
       "--data-dir (one per output step that changed them)", where="host"),
    _c("m2mc_host_retired_notices_total", "retired hosts told so (their status answered, "
       "on the master)", where="host"),
    _c("m2mc_host_admin_refused_total", "operators' retire/readmit requests refused: "
       "max_admin_requests held", where="host", alarm="rate > 0"),
    _g("m2mc_host_configuration_hosts", "hosts of the committed configuration (configured "
       "or ever known, less the retired): what quorums count", where="host"),
    _g("m2mc_host_quorum", "hosts needed for an election or a commit under the committed "
       "configuration (a majority of m2mc_host_configuration_hosts)", where="host",
       alarm="m2mc_host_hosts_live < m2mc_host_quorum for 10s: nothing commits"),
    _g("m2mc_host_retired_hosts", "hosts retired for good in the committed configuration",
       where="host"),
    _c("m2mc_gateway_relayed_total", "records relayed in the cell", where="host"),
    _c("m2mc_gateway_transferred_total", "records transferred to joining members",
       where="host"),
    _c("m2mc_gateway_nacks_total", "NACKs from members", where="host"),
    _c("m2mc_gateway_nacks_discarded_total", "NACKs discarded (nothing to send or too old)",
       where="host"),
    _c("m2mc_gateway_forwarded_total", "member requests forwarded to the coordinator",
       where="host"),
    _c("m2mc_gateway_refused_full_total", "member requests refused: the forward queue was "
       "full (max_forward_queue)", where="host", alarm="rate > 0"),
    _c("m2mc_gateway_aborted_total", "transfers aborted", where="host"),
    _c("m2mc_gateway_beacons_total", "beacons sent", where="host",
       alarm="rate == 0 for 10s: the cell hears nothing"),
    _c("m2mc_gateway_moved_total", "members told to move to another cell (balancing)",
       where="host"),
    _c("m2mc_gateway_rate_limited_total", "JOINs, NACKs and arrivals refused by the rate "
       "limiter", where="host", alarm="rate > 0 for 5m"),
    _c("m2mc_gateway_local_refused_total", "new computers refused: max_local heard",
       where="host", alarm="rate > 0"),
    _c("m2mc_gateway_readdressed_total", "members heard from a new address (their answers "
       "follow)", where="host"),
    _c("m2mc_gateway_history_served_total", "history answers sent to members (its own or the "
       "master's)", where="host"),
    _c("m2mc_gateway_history_refused_total", "history requests of non-members, or for groups not "
       "theirs", where="host", alarm="rate > 0 for 5m"),
    _c("m2mc_gateway_history_asked_total", "history requests passed to the master (this host's log "
       "began later)", where="host"),
    _c("m2mc_coordinator_sequenced_total", "messages sequenced (present on the master)",
       where="host"),
    _c("m2mc_coordinator_duplicates_total", "duplicate requests ignored", where="host"),
    _c("m2mc_coordinator_early_buffered_total", "messages buffered until earlier ones came",
       where="host"),
    _c("m2mc_coordinator_early_dropped_total", "early messages dropped (the member resends)",
       where="host"),
    _c("m2mc_coordinator_discarded_a5_total", "requests of processes that are not members "
       "(seeds/001 A5)", where="host"),
    _c("m2mc_coordinator_discarded_a6_total", "JOINs of members already known (seeds/001 "
       "A6)", where="host"),
    _c("m2mc_coordinator_expelled_backlog_total", "members expelled because their backlog "
       "(what the hosts held for them, undelivered) passed max_backlog_bytes or "
       "max_backlog_age: an application that stopped reading", where="host",
       alarm="increase > 0"),
    _c("m2mc_coordinator_expelled_total", "members expelled after member_timeout",
       where="host"),
    _c("m2mc_coordinator_refused_full_total", "JOINs refused: max_members", where="host",
       alarm="rate > 0"),
    _c("m2mc_coordinator_groups_refused_total", "joins of a group refused: max_groups, "
       "max_member_groups, or a bad name", where="host", alarm="rate > 0"),
    _c("m2mc_coordinator_noops_total", "items sequenced as NOOP (a refused join, a message to a "
       "group its sender is not in)", where="host"),
]
