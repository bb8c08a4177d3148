"""A node with a durable log keeps its trace in step with the log across kill -9:
what the log committed is on record exactly once, what it did not is not on record,
and the next incarnation says that the last one crashed."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from m2mc.api import Node, NodeConfig
from m2mc.runtime.tracing import WallClockSink
from m2mc.trace.writer import TraceWriter


def _rows(trace: Path) -> list[dict[str, object]]:
    return [json.loads(line) for path in sorted(trace.glob("*.jsonl"))
            for line in path.read_text().splitlines() if line]


async def _until(condition: object, what: str) -> None:
    for _ in range(2000):
        if condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never happened: {what}")


def _config(tmp_path: Path, channel: str) -> NodeConfig:
    return NodeConfig(pid="a", channel=channel, data_dir=str(tmp_path / "a"),
                      trace_dir=str(tmp_path / "trace"), run_id="journal")


async def test_batch_committed_but_not_written_is_put_back_by_the_next_incarnation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    channel = f"mem://journal-{uuid.uuid4().hex[:8]}"
    node = Node(_config(tmp_path, channel))
    await node.start()
    group = await node.create_group("journal")
    await group.send("one")
    store = node._node().store
    await _until(lambda: store.high_water(group.gid, "a") == 1, "a:1 taken")
    # The kill lands between the commit of the next batch and its write to the file:
    # the driver commits, then appends the batch's lines (here: nowhere).
    cut_off: list[str] = []
    monkeypatch.setattr(WallClockSink, "append", lambda self, text: cut_off.append(text))
    await group.send("two")
    await _until(lambda: any('"a:2"' in text for text in cut_off), "a:2 committed")
    await node._drv().close()  # the process is gone: no clean close, nothing flushed
    monkeypatch.undo()

    async with Node(_config(tmp_path, channel)) as again:
        assert again.pid == "a"
    rows = _rows(tmp_path / "trace")
    sends = [r["mid"] for r in rows if r["event"] == "send"]
    delivers = [r["mid"] for r in rows if r["event"] == "deliver" and r["node"] == "a"]
    assert sends == ["a:1", "a:2"]
    assert sorted(delivers) == ["a:1", "a:2"]
    lifecycle = [(r["event"], r["detail"]) for r in rows if r["event"] in ("crash", "restart")]
    assert lifecycle == [("crash", None), ("restart", '{"clean":false}')]
    crash = next(r for r in rows if r["event"] == "crash")
    two = next(r for r in rows if r["event"] == "send" and r["mid"] == "a:2")
    assert crash["t"] == two["t"]  # the last moment the log knew the old process alive


async def test_a_clean_restart_is_on_record_without_a_crash(tmp_path: Path) -> None:
    channel = f"mem://journal-{uuid.uuid4().hex[:8]}"
    async with Node(_config(tmp_path, channel)) as node:
        group = await node.create_group("journal")
        await group.send("one")
    async with Node(_config(tmp_path, channel)):
        pass
    rows = _rows(tmp_path / "trace")
    assert [r["mid"] for r in rows if r["event"] == "send"] == ["a:1"]
    assert [(r["event"], r["detail"]) for r in rows if r["event"] in ("crash", "restart")] == [
        ("restart", '{"clean":true}')]


@pytest.mark.parametrize(("on_disk", "put_back"), [(3, 0), (2, 1), (0, 3)])
def test_recover_appends_only_the_lines_the_file_lacks(
        tmp_path: Path, on_disk: int, put_back: int) -> None:
    batch = "".join(f'{{"n":{i}}}\n' for i in range(3))
    lines = batch.splitlines(keepends=True)
    previous = tmp_path / "a.jsonl"
    previous.write_text('{"n":-1}\n' + "".join(lines[:on_disk]))
    writer = TraceWriter(tmp_path / "a.1.jsonl", run="r", node="a")
    sink = WallClockSink(writer, 0.0, previous)
    assert sink.recover(batch) == put_back
    writer.close()
    assert (tmp_path / "a.1.jsonl").read_text() == "".join(lines[on_disk:])


async def test_packets_are_traced_when_asked(tmp_path: Path) -> None:
    channel = f"mem://journal-{uuid.uuid4().hex[:8]}"
    config = _config(tmp_path, channel)
    config.trace_packets = True
    async with Node(config) as node, Node(NodeConfig(pid="b", channel=channel)) as other:
        group = await node.create_group("journal")
        joined = await other.join(group.gid)
        await group.send("x" * 300)
        assert (await joined.receive(timeout=5.0)).text == "x" * 300
    rows = _rows(tmp_path / "trace")
    out = [r for r in rows if r["event"] == "packet_out"]
    into = [r for r in rows if r["event"] == "packet_in"]
    assert out and into
    assert all(r["detail"] == '{"channel":"mem"}' and 8 <= r["bytes"] <= 508 for r in out + into)
    assert any(r["bytes"] > 300 for r in out)  # the data message's packet
