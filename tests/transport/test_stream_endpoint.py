"""M2MPEndpoint messages written and read in pieces (runtime/stream_io.py), and
``m2mc send --file`` / ``m2mc listen`` on them as real processes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from m2mc.demo.tour import Child
from m2mc.errors import UsageError
from m2mc.runtime.endpoint import M2MPEndpoint, MessageAbandonedError
from m2mc.runtime.stream_io import IncomingMessage
from m2mc.wire.m2mp import M2MPConfig

DEADLINE = 60.0
STREAMING = M2MPConfig(stream_threshold=16 * 1024)


async def read_all(incoming: IncomingMessage) -> bytes:
    return await asyncio.wait_for(incoming.read(), DEADLINE)


async def test_a_message_written_in_pieces_is_read_in_pieces_and_small_ones_whole() -> None:
    rng = random.Random(4)
    big = rng.randbytes(3 << 20)
    async with M2MPEndpoint("mem://pieces", filters=[b""]) as sender, \
            M2MPEndpoint("mem://pieces", STREAMING, filters=[b""]) as reader:

        async def write() -> int:
            async with sender.open_message() as out:
                start = 0
                while start < len(big):  # pieces of any size
                    step = rng.choice([1, 499, 500, 501, 7000, 65536])
                    await out.write(big[start:start + step])
                    start += step
            return out.message_id

        writing = asyncio.ensure_future(write())
        first = await asyncio.wait_for(reader.accept(), DEADLINE)
        pieces = 0
        got = bytearray()
        async for piece in first:
            got += piece
            pieces += 1
        assert bytes(got) == big and first.complete
        assert first.message_id == await writing
        assert pieces > 1  # it came as it arrived, not whole
        small_id = await sender.send(b"a small one")
        small = await asyncio.wait_for(reader.accept(), DEADLINE)
        assert (small.message_id, await read_all(small)) == (small_id, b"a small one")
        assert reader.stats["streams_in"] == 1 and reader.stats["stream_buffered"] == 0


async def test_a_reader_that_falls_behind_gets_an_error_and_the_endpoint_goes_on() -> None:
    async with M2MPEndpoint("mem://slow", filters=[b""]) as sender, \
            M2MPEndpoint("mem://slow", STREAMING, filters=[b""],
                         max_stream_buffer=64 * 1024) as reader:
        await sender.send(bytes(1 << 20))  # nobody reads it while it arrives
        await sender.drain()
        late = await asyncio.wait_for(reader.accept(), DEADLINE)
        with pytest.raises(MessageAbandonedError) as caught:
            await read_all(late)
        assert caught.value.event.reason == "overflow"
        assert reader.stats["stream_overflow"] == 1
        assert reader.stats["stream_buffered"] == 0 and reader.stats["streams_open"] == 0
        await sender.send(b"after it")
        after = await asyncio.wait_for(reader.accept(), DEADLINE)
        assert await read_all(after) == b"after it"


async def test_a_message_whose_writer_gives_up_is_an_error_for_its_reader() -> None:
    quick = M2MPConfig(stream_threshold=16 * 1024, message_timeout=0.3)
    async with M2MPEndpoint("mem://aborted", filters=[b""]) as sender, \
            M2MPEndpoint("mem://aborted", quick, filters=[b""]) as reader:

        class Interrupted(Exception):
            pass

        with pytest.raises(Interrupted):
            async with sender.open_message() as out:
                await out.write(bytes(100_000))
                raise Interrupted  # the writer fails: the message is never closed
        incoming = await asyncio.wait_for(reader.accept(), DEADLINE)
        with pytest.raises(MessageAbandonedError) as caught:
            await read_all(incoming)
        assert caught.value.event.reason == "timeout"
        assert 0 < incoming.received < 100_000  # what came before: never a "complete" message


async def test_each_mode_has_its_own_reading_calls() -> None:
    async with M2MPEndpoint("mem://modes", STREAMING, filters=[b""]) as streaming, \
            M2MPEndpoint("mem://modes", filters=[b""]) as whole:
        with pytest.raises(UsageError):
            await streaming.receive()
        with pytest.raises(UsageError):
            await whole.accept()


WAIT = 120.0
Spawn = Callable[..., Child]


def test_send_file_and_listen_in_pieces_as_processes(m2mc: Spawn, mcast_url: str,
                                                     tmp_path: Path) -> None:
    """``m2mc send --file`` of 5 MiB and ``m2mc listen``: the JSON lines of both agree
    with the file (length, SHA-256, first 16 bytes), computed as the pieces came."""
    data = random.Random(2).randbytes(5 << 20)
    path = tmp_path / "five.bin"
    path.write_bytes(data)
    listener = m2mc("listen", "--channel", mcast_url, "--count", "2", "--timeout", "60")
    listener.wait_stderr("listening on", WAIT)
    sender = m2mc("send", "--channel", mcast_url, "--file", str(path))
    assert sender.finish(WAIT) == 0
    small = m2mc("send", "--channel", mcast_url, stdin=b"and a small one")
    assert small.finish(WAIT) == 0
    assert listener.finish(WAIT) == 0
    sent = [json.loads(sender.stdout[-1]), json.loads(small.stdout[-1])]
    assert sent[0] == {"id": sent[0]["id"], "len": len(data),
                       "sha256": hashlib.sha256(data).hexdigest()}
    rows = {row["id"]: row for row in listener.json_lines()}
    assert rows[sent[0]["id"]] == {**sent[0], "head": data[:16].hex()}
    assert rows[sent[1]["id"]] == {**sent[1], "head": b"and a small one".hex()}
