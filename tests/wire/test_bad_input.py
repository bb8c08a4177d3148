"""100,000 random and mutated datagrams: nothing escapes but counted drops; memory bounded."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Iterator

from m2mc.wire.m2mp import M2MPConfig, M2MPLayer, MessageAbandoned, MessageReceived
from m2mc.wire.packet import HEADER_SIZE, LAST_FLAG, MAX_DATAGRAM, fragments

TOTAL = 100_000
BOUND_MESSAGES = 64
BOUND_BYTES = 32 * 1024


def hostile(rng: random.Random, templates: list[bytes]) -> Iterator[bytes]:
    """Random bytes, bit flips, truncations, extensions and plausible-but-wrong fragments."""
    while True:
        kind = rng.random()
        template = rng.choice(templates)
        if kind < 0.2:
            yield rng.randbytes(rng.randrange(0, 700))
        elif kind < 0.4:
            mutated = bytearray(template)
            for _ in range(rng.randrange(1, 9)):
                mutated[rng.randrange(len(mutated))] ^= 1 << rng.randrange(8)
            yield bytes(mutated)
        elif kind < 0.5:
            yield template[:rng.randrange(len(template) + 1)]
        elif kind < 0.6:
            yield template + rng.randbytes(rng.randrange(1, 200))
        elif kind < 0.9:
            # a fragment of a message that never completes: fills the reassembler
            word = rng.randrange(0, 40) | (LAST_FLAG if rng.random() < 0.05 else 0)
            header = rng.randrange(0, 4000).to_bytes(4, "big") + word.to_bytes(4, "big")
            yield header + rng.randbytes(rng.randrange(0, 501))
        else:
            yield template[:4] + rng.getrandbits(32).to_bytes(4, "big") + template[8:]


def test_hundred_thousand_hostile_datagrams_are_counted_and_dropped() -> None:
    rng = random.Random(20240601)
    config = M2MPConfig(message_timeout=0.003, max_partial_messages=BOUND_MESSAGES,
                        max_partial_bytes=BOUND_BYTES, completed_cache=1024, flow_control=False,
                        redundancy=1)
    receiver = M2MPLayer(config, random.Random(1))
    receiver.add_filter(b"")
    template_source = M2MPLayer(config, random.Random(2))
    templates = [d for n in (0, 10, 499, 500, 501, 1700) for d in
                 fragments(template_source.send(b"", 0.0), rng.randbytes(n))]
    honest = M2MPLayer(config, random.Random(3))
    legit: dict[int, bytes] = {}

    stream = hostile(rng, templates)
    expected_malformed = 0
    received: dict[int, bytes] = {}
    abandoned_events = 0
    now = 0.0
    baseline = 0
    try:
        for index in range(TOTAL):
            # Alternate floods (the bound is hit) and trickles (message timeouts fire).
            now += 1e-6 if (index // 5000) % 2 else 1e-4
            if index % 1000 == 500:  # an honest message, its packets back to back
                payload = rng.randbytes(rng.randrange(0, 1500))
                legit[honest.send(payload, now)] = payload
                batch = honest.datagrams_to_send(now)
            else:
                batch = [next(stream)]
            for datagram in batch:
                if not HEADER_SIZE <= len(datagram) <= MAX_DATAGRAM:
                    expected_malformed += 1
                receiver.receive_datagram(datagram, now)
            deadline = receiver.next_deadline()
            if deadline is not None and deadline <= now:
                receiver.on_timer(now)
            for event in receiver.events():
                if isinstance(event, MessageReceived):
                    received[event.message_id] = event.payload
                else:
                    assert isinstance(event, MessageAbandoned)
                    abandoned_events += 1
            assert receiver.partial_messages <= BOUND_MESSAGES
            assert receiver.partial_bytes <= BOUND_BYTES
            if index == 85_000:  # traced only late: tracing slows every allocation
                tracemalloc.start()
            elif index == 88_000:
                baseline = tracemalloc.get_traced_memory()[0]
        grown = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()

    stats = receiver.stats
    assert stats.packets_in == TOTAL - len(legit) + sum(
        max(1, -(-len(p) // 500)) for p in legit.values())
    assert stats.malformed == expected_malformed > 0
    assert sum(stats.abandoned.values()) >= abandoned_events > 0
    assert {"bound", "timeout"} <= set(stats.abandoned)
    # Every honest message arrived intact despite the flood.
    assert all(received.get(mid) == payload for mid, payload in legit.items())
    # Memory over the last 12,000 datagrams stays flat: every table is bounded.
    assert grown < 1024 * 1024, grown
