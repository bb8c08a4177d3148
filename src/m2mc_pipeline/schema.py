"""The trace as Spark sees it: docs/interfaces.md §4, schema version 1.

The schema is explicit (never inferred): a JSON line with a missing field gets
null, and a Parquet file written by any tool is cast to these types on load.
"""

from __future__ import annotations

from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

SCHEMA_VERSION = 1

TRACE_SCHEMA = StructType([
    StructField("run", StringType(), True),
    StructField("node", StringType(), True),
    StructField("t", DoubleType(), True),
    StructField("event", StringType(), True),
    StructField("group", StringType(), True),
    StructField("mid", StringType(), True),
    StructField("parent", StringType(), True),
    StructField("order", StringType(), True),
    StructField("gseq", LongType(), True),
    StructField("bytes", LongType(), True),
    StructField("peer", StringType(), True),
    StructField("detail", StringType(), True),
])

COLUMNS: tuple[str, ...] = tuple(f.name for f in TRACE_SCHEMA.fields)

# Event names (docs/interfaces.md §4).
SEND = "send"
RECV = "recv"
DUP = "dup"
DELIVER = "deliver"
JOIN = "join"
LEAVE = "leave"
VIEW = "view"
SYNC_REQ = "sync_req"
SYNC_RESP = "sync_resp"
NACK = "nack"
RETRANSMIT = "retransmit"
DROP = "drop"
CRASH = "crash"
RESTART = "restart"
ELECT = "elect"
PACKET_OUT = "packet_out"
PACKET_IN = "packet_in"
SKIP = "skip"  # a message given up: gone from every log that answered (docs/group.md 8)

EVENTS = frozenset({
    SEND, RECV, DUP, DELIVER, JOIN, LEAVE, VIEW, SYNC_REQ, SYNC_RESP, NACK, RETRANSMIT,
    DROP, CRASH, RESTART, ELECT, PACKET_OUT, PACKET_IN, SKIP,
})

ORDERS = ("sb", "causal", "total", "fifo", "none")

# Columns the loader adds. ``pos`` breaks ties in ``t`` at one node: the event's
# place in its file (writers append a node's events in the order they happen).
POS = "pos"
