"""The uplink's window of full NEW frames (docs/infra.md, "Hops and their
reliability"; docs/decisions.md, "The uplink keeps a window of full NEW frames")."""

from __future__ import annotations

from test_member import frames, joined, member

from m2mc.infra import messages as m


def test_a_light_load_keeps_one_frame_at_a_time() -> None:
    core = member(retransmit=0.5, uplink_window=8)
    joined(core)
    frames(core)
    core.send(b"x", 0.0)
    (f1,) = frames(core)
    for _ in range(5):
        core.send(b"y", 0.0)
    assert frames(core) == []  # the next frame is not full: it waits for ack(f1)
    core.receive(m.Ack("G", "A", f1.rseq), 0.1)  # type: ignore[union-attr]
    (f2,) = frames(core)
    assert isinstance(f2, m.NewReq) and len(f2.items) == 5


def test_full_frames_share_the_window_and_are_acked_and_resent_on_their_own() -> None:
    core = member(retransmit=0.5, uplink_window=3, max_datagram=100)
    joined(core)
    frames(core)
    for _ in range(12):
        core.send(b"z" * 30, 0.0)  # 46 bytes with the item's overhead: 2 per frame
    out = frames(core)
    assert len(out) == 3 and all(isinstance(f, m.NewReq) for f in out)  # the window
    assert [len(f.items) for f in out] == [1, 2, 2]  # type: ignore[union-attr]
    assert core.pending_sends == 12
    f1, f2, f3 = out
    core.receive(m.Ack("G", "A", f2.rseq), 0.1)  # an ack out of order frees one place
    (f4,) = frames(core)
    assert [i.nseq for i in f4.items] == [6, 7]  # type: ignore[union-attr]
    core.on_timer(0.6)  # only the oldest is resent; every timer starts again
    assert frames(core) == [f1]
    core.on_timer(0.7)
    assert frames(core) == []
    for f in (f1, f3, f4):
        core.receive(m.Ack("G", "A", f.rseq), 0.8)  # type: ignore[union-attr]
    assert sorted(core.unconfirmed) == [1, 2, 3, 4, 5, 6, 7]
    nxt = frames(core)
    assert [i.nseq for f in nxt for i in f.items] == [8, 9, 10, 11]  # type: ignore[union-attr]
    assert [i.nseq for i in core.news] == [12]  # not full: it waits for an empty window


def test_a_nack_takes_the_next_room_in_the_window_and_nothing_starts_beside_it() -> None:
    core = member(retransmit=0.5, uplink_window=4, max_datagram=100)
    joined(core)
    frames(core)
    for _ in range(4):
        core.send(b"z" * 90, 0.0)  # one message alone fills a frame
    out = frames(core)
    assert len(out) == 4
    core.receive(m.Normals("G", (m.Record(5, 5, m.APP, core.mid, 4, 4, 0, b"q", "infra"),)),
                 0.1)  # type: ignore[arg-type]  # gseq 2..4 missing: a NACK is due
    assert frames(core) == []  # the window is full: the NACK waits for room
    core.receive(m.Ack("G", "A", out[0].rseq), 0.2)  # type: ignore[union-attr]
    (nack,) = frames(core)  # beside the three NEW frames still outstanding
    assert isinstance(nack, m.NackReq) and (nack.s1, nack.s2) == (1, 5)
    for f in out[1:3]:
        core.receive(m.Ack("G", "A", f.rseq), 0.2)  # type: ignore[union-attr]
    core.send(b"z" * 90, 0.2)
    assert frames(core) == []  # no NEW frame starts beside a NACK
    core.receive(m.Ack("G", "A", nack.rseq), 0.25)
    core.receive(m.Ack("G", "A", out[3].rseq), 0.25)  # type: ignore[union-attr]
    (new,) = frames(core)
    assert isinstance(new, m.NewReq)
