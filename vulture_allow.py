"""Names vulture (``make test``) reports as unused that are used, each with the reason.

Vulture cannot see uses by name from outside Python (Textual, asyncio, socketserver,
pytest, Hypothesis, a registry of strings) nor a counter read as a whole through
dataclasses.fields. Dead code is deleted, not listed here.

Each name is listed once (vulture takes a name as used wherever it is used, so one
entry covers every place it reports the name), as ``name`` or ``_.name`` for an
attribute, with ``# path:line: why`` citing a line where vulture reports the name
(a decorated function: its ``def`` line), which holds it: tests/architecture/
test_vulture_allow.py checks that. To see whether an entry is still needed, delete it
and run vulture.
"""

# ruff: noqa
# mypy: ignore-errors
# type: ignore

_: object = None

exc_type  # src/m2mc/api/node.py:177: the context-manager protocol passes it; this exit does not need it
register_section  # src/m2mc/config.py:139: public API for another package's TOML section (docs/configuration.md)
DurableStack  # src/m2mc/core.py:63: a typing.Protocol: what m2mc.core's docstring says a durable stack offers its driver (structural, never named as a base)
_.__class__  # src/m2mc/native/fastobj.py:71: __class__ assignment turns a twin into the dataclass (the point of m2mc.native.fastobj)
wire_targets  # src/m2mc/fuzz_targets.py:200: loaded by name from the fuzz registry ("m2mc.fuzz_targets:...")
transport_targets  # src/m2mc/fuzz_targets.py:310: loaded by name from the fuzz registry ("m2mc.fuzz_targets:...")
ordering_targets  # src/m2mc/fuzz_targets.py:362: loaded by name from the fuzz registry ("m2mc.fuzz_targets:...")
security_targets  # src/m2mc/fuzz_targets.py:375: loaded by name from the fuzz registry ("m2mc.fuzz_targets:...")
infra_targets  # src/m2mc/fuzz_targets.py:482: loaded by name from the fuzz registry ("m2mc.fuzz_targets:...")
chat_targets  # src/m2mc/fuzz_targets.py:596: loaded by name from the fuzz registry ("m2mc.fuzz_targets:...")
replies_sent  # src/m2mc/group/gjlp.py:85: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
replies_suppressed  # src/m2mc/group/gjlp.py:86: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
replies_heard  # src/m2mc/group/gjlp.py:87: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
order_conflicts  # src/m2mc/group/gjlp.py:89: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
keyed_members_ignored  # src/m2mc/group/gjlp.py:90: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
names_relayed  # src/m2mc/group/gjlp.py:91: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
requests_sent  # src/m2mc/group/msp.py:77: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
responses_sent  # src/m2mc/group/msp.py:79: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
stale_discarded  # src/m2mc/group/msp.py:81: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
mirs_refused  # src/m2mc/group/msp.py:82: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
requests_refused  # src/m2mc/group/msp.py:83: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
requests_admitted_late  # src/m2mc/group/msp.py:84: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
responses_ignored  # src/m2mc/group/msp.py:85: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
sync_truncated  # src/m2mc/group/msp.py:86: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
digests_truncated  # src/m2mc/group/msp.py:87: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
messages_sent  # src/m2mc/group/msp.py:88: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
requests_ahead  # src/m2mc/group/msp.py:89: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
malformed_records  # src/m2mc/group/node_stats.py:21: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
oversized  # src/m2mc/group/node_stats.py:23: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
status_suppressed  # src/m2mc/group/node_stats.py:24: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
refuted  # src/m2mc/group/node_stats.py:25: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
auth_failed  # src/m2mc/group/node_stats.py:26: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
sealed_refused  # src/m2mc/group/node_stats.py:27: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
sender_mismatch  # src/m2mc/group/node_stats.py:28: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
reconnects_by_interface  # src/m2mc/group/reconnect.py:70: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
reconnects_by_silence  # src/m2mc/group/reconnect.py:71: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
reconnects_held  # src/m2mc/group/reconnect.py:72: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
reconnect_advs_suppressed  # src/m2mc/group/reconnect.py:73: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
reconnect_advs_repeated  # src/m2mc/group/reconnect.py:74: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
nacks_sent  # src/m2mc/group/repair.py:68: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
nacks_suppressed  # src/m2mc/group/repair.py:69: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
repairs_suppressed  # src/m2mc/group/repair.py:72: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
repairs_refused  # src/m2mc/group/repair.py:73: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
absurd_high_water  # src/m2mc/group/repair.py:74: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
senders_refused  # src/m2mc/group/repair.py:76: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
nack_intervals_ignored  # src/m2mc/group/repair.py:77: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
holdoffs_refused  # src/m2mc/group/repair.py:78: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
status_truncated  # src/m2mc/group/repair.py:79: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
status_entries_ignored  # src/m2mc/group/repair.py:80: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
holder_nacks  # src/m2mc/group/repair.py:81: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
gone_sent  # src/m2mc/group/retention.py:58: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
gone_suppressed  # src/m2mc/group/retention.py:59: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
gone_truncated  # src/m2mc/group/retention.py:60: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
gone_received  # src/m2mc/group/retention.py:61: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
gone_contradicted  # src/m2mc/group/retention.py:62: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
skipped_positions  # src/m2mc/group/retention.py:65: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
skips_deferred  # src/m2mc/group/retention.py:66: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
stream_sent  # src/m2mc/group/stream_stats.py:21: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
stream_received  # src/m2mc/group/stream_stats.py:22: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
stream_failed  # src/m2mc/group/stream_stats.py:23: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
stream_chunks_sent  # src/m2mc/group/stream_stats.py:24: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
stream_chunks_received  # src/m2mc/group/stream_stats.py:25: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
stream_chunk_duplicates  # src/m2mc/group/stream_stats.py:26: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
stream_nacks_suppressed  # src/m2mc/group/stream_stats.py:33: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
stream_repairs_suppressed  # src/m2mc/group/stream_stats.py:35: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
stream_store_full  # src/m2mc/group/stream_stats.py:37: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
absurd_epoch  # src/m2mc/group/total/core.py:89: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
absurd_position  # src/m2mc/group/total/core.py:90: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
prepares  # src/m2mc/group/total/core.py:93: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
config_records  # src/m2mc/group/total/core.py:96: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
transferred  # src/m2mc/infra/gateway.py:70: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
elections_started  # src/m2mc/infra/host_stats.py:14: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
saves  # src/m2mc/infra/host_stats.py:21: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
_.connection_lost  # src/m2mc/infra_runtime/net.py:233: asyncio calls it: a protocol callback
_.datagram_received  # src/m2mc/infra_runtime/net.py:415: asyncio calls it: a protocol callback
_.error_received  # src/m2mc/infra_runtime/net.py:418: asyncio calls it: a protocol callback
_.get_buffer  # src/m2mc/infra_runtime/net.py:208: asyncio calls it: a buffered protocol callback
sizehint  # src/m2mc/infra_runtime/net.py:208: asyncio's argument of get_buffer, not needed (the buffer has one size)
_.buffer_updated  # src/m2mc/infra_runtime/net.py:213: asyncio calls it: a buffered protocol callback
ASYMMETRIC  # src/m2mc/kinds.py:106: a StrEnum member, built from scenario text by value (PartitionKind(text))
LOGNORMAL  # src/m2mc/kinds.py:116: a StrEnum member, built from scenario text by value (DistKind(text)); the last case of m2mc.sim.dists
_.log_message  # src/m2mc/metrics/server.py:112: http.server calls it (silenced: requests are not logged)
daemon_threads  # src/m2mc/metrics/server.py:122: socketserver reads this class attribute
block_on_close  # src/m2mc/metrics/server.py:123: socketserver reads this class attribute
_.address_family  # src/m2mc/metrics/server.py:126: socketserver reads it to open the socket
_.handle_error  # src/m2mc/metrics/server.py:149: socketserver calls it on an error in a handler
_.watching_link  # src/m2mc/runtime/stack.py:50: state for inspection: whether the channel watches its interface (the call on its right has the effect)
sender_evictions  # src/m2mc/security/auth.py:125: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
clients_connected  # src/m2mc/runtime/daemon.py:39: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
_.pause_writing  # src/m2mc/transport/daemon_channel.py:46: asyncio calls it: a protocol callback
_.resume_writing  # src/m2mc/transport/daemon_channel.py:49: asyncio calls it: a protocol callback
from_clients  # src/m2mc/transport/router.py:32: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
bytes_in  # src/m2mc/wire/m2mp_types.py:100: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
bytes_out  # src/m2mc/wire/m2mp_types.py:101: a counter: a field of a *Stats dataclass, read as a whole (stats(), the metrics iterate dataclasses.fields)
TITLE  # src/m2mc_chat/app.py:43: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
ENABLE_COMMAND_PALETTE  # src/m2mc_chat/app.py:44: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
BINDINGS  # src/m2mc_chat/app.py:45: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.on_mount  # src/m2mc_chat/app.py:63: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.sub_title  # src/m2mc_chat/app.py:98: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_quit  # src/m2mc_chat/app.py:130: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
DEFAULT_CSS  # src/m2mc_chat/ui/browser.py:54: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.compose  # src/m2mc_chat/ui/browser.py:64: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.on_data_table_row_selected  # src/m2mc_chat/ui/browser.py:120: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_create  # src/m2mc_chat/ui/browser.py:167: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_create_keyed  # src/m2mc_chat/ui/browser.py:178: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_leave  # src/m2mc_chat/ui/browser.py:212: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_close  # src/m2mc_chat/ui/browser.py:236: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.auto_expand  # src/m2mc_chat/ui/conversation.py:53: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.allow_expand  # src/m2mc_chat/ui/conversation.py:139: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.on_input_submitted  # src/m2mc_chat/ui/dialogs.py:63: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_cancel  # src/m2mc_chat/ui/dialogs.py:76: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.on_button_pressed  # src/m2mc_chat/ui/dialogs.py:100: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_answer  # src/m2mc_chat/ui/dialogs.py:103: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.on_key  # src/m2mc_chat/ui/main_screen.py:119: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_tree  # src/m2mc_chat/ui/main_screen.py:132: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_._folded  # src/m2mc_chat/ui/main_screen.py:236: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_._unfolded  # src/m2mc_chat/ui/main_screen.py:241: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_._group_chosen  # src/m2mc_chat/ui/main_screen.py:246: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_._submitted  # src/m2mc_chat/ui/main_screen.py:252: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.cursor_position  # src/m2mc_chat/ui/main_screen.py:272: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_reply  # src/m2mc_chat/ui/main_screen.py:284: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_new_thread  # src/m2mc_chat/ui/main_screen.py:297: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_toggle_fold  # src/m2mc_chat/ui/main_screen.py:310: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_next_unread  # src/m2mc_chat/ui/main_screen.py:314: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_mark_all_read  # src/m2mc_chat/ui/main_screen.py:324: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_collapse_all  # src/m2mc_chat/ui/main_screen.py:333: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_expand_all  # src/m2mc_chat/ui/main_screen.py:343: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_go_parent  # src/m2mc_chat/ui/main_screen.py:350: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_previous_group  # src/m2mc_chat/ui/main_screen.py:361: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_next_group  # src/m2mc_chat/ui/main_screen.py:364: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_groups  # src/m2mc_chat/ui/main_screen.py:367: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.action_help  # src/m2mc_chat/ui/main_screen.py:376: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
_.highlighted  # src/m2mc_chat/ui/panels.py:30: Textual calls or reads it by name (compose, on_*/action_* handlers, BINDINGS, DEFAULT_CSS, widget attributes)
__getattr__  # src/m2mc_pipeline/__init__.py:19: a module __getattr__ (PEP 562): the package's lazy imports
_.metrics_path  # src/m2mc_pipeline/api.py:66: public: where the pipeline writes metrics.json (docs/pipeline.md)
_._jvm  # src/m2mc_pipeline/session.py:214: set on a foreign object (the Spark session) that reads it
_.compress_type  # src/m2mc_pipeline/ship.py:92: set on a zipfile.ZipInfo, which zipfile reads
_.external_attr  # src/m2mc_pipeline/ship.py:93: set on a zipfile.ZipInfo, which zipfile reads (file mode)
pytestmark  # tests/chat/test_multiprocess.py:15: pytest reads it (module marks)
_.deliver_all  # tests/group/test_seqlog.py:211: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.time_passes  # tests/group/test_seqlog.py:217: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.one_entry_per_position  # tests/group/test_seqlog.py:241: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.teardown  # tests/group/test_seqlog.py:244: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
TestSeqLog  # tests/group/test_seqlog.py:260: pytest collects it (Machine.TestCase)
_.reopen  # tests/group/test_store.py:81: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.same_log  # tests/group/test_store.py:97: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.never_more_than_a_window_ahead_of_the_readers  # tests/group/test_window.py:162: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.in_flight_is_what_the_slowest_active_reader_lacks  # tests/group/test_window.py:168: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.blocked_has_a_way_out  # tests/group/test_window.py:176: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.exactly_the_model  # tests/group/test_window.py:190: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.arrive_again  # tests/ordering/test_stateful.py:74: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.nothing_held_could_be_delivered  # tests/ordering/test_stateful.py:97: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.digest_is_what_we_have  # tests/ordering/test_stateful.py:105: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.write_rows  # tests/group/test_row_segments.py:37: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.drop_rows  # tests/group/test_row_segments.py:51: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.replace_row  # tests/group/test_row_segments.py:62: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.empty_table  # tests/group/test_row_segments.py:72: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.every_live_value_reads_back  # tests/group/test_row_segments.py:78: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
_.no_segment_older_than_the_oldest_referred_to_is_left  # tests/group/test_row_segments.py:83: Hypothesis' RuleBasedStateMachine runs its @rule/@invariant methods and teardown
TestSbMachine  # tests/ordering/test_stateful.py:184: pytest collects it (Machine.TestCase)
TestFifoMachine  # tests/ordering/test_stateful.py:185: pytest collects it (Machine.TestCase)
TestCausalMachine  # tests/ordering/test_stateful.py:186: pytest collects it (Machine.TestCase)
TestTotalMachine  # tests/ordering/test_stateful.py:187: pytest collects it (Machine.TestCase)
_clear_probes  # tests/sim/conftest.py:116: an autouse pytest fixture
pytest_configure  # tests/conftest.py:33: a pytest hook (checks M2MC_SEEDS)
