"""``Group.send_stream`` and ``Group.stream``: messages of any size through the API
(docs/api.md, "Messages of any size"), over mem://."""

from __future__ import annotations

import asyncio
import hashlib
import random
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from m2mc.api import Node, NodeConfig, StreamError
from m2mc.errors import UsageError
from m2mc.group.stream_codec import STREAM_MAGIC

DEADLINE = 60.0


def bus() -> str:
    return f"mem://streams-{uuid.uuid4().hex[:8]}"


async def test_a_file_sent_as_a_stream_is_read_as_a_stream_with_its_reply_after_it(
        tmp_path: Path) -> None:
    data = random.Random(1).randbytes(3_000_001)
    path = tmp_path / "file.bin"
    path.write_bytes(data)
    channel = bus()
    async with Node(NodeConfig(channel=channel)) as alice, \
            Node(NodeConfig(channel=channel)) as bob:
        group = await alice.create_group("files")
        theirs = await bob.join(group.gid, timeout=10.0)
        with path.open("rb") as source:
            mid = await group.send_stream(source, size=len(data))
        await group.send("that was the file", reply_to=mid)
        head = await theirs.receive(timeout=DEADLINE)
        assert head.mid == mid and head.is_stream and head.data.startswith(STREAM_MAGIC)
        reader = theirs.stream(head)
        assert reader.size_hint == len(data)
        sha = hashlib.sha256()
        pieces = 0
        async for piece in reader:
            sha.update(piece)
            pieces += 1
        assert sha.digest() == hashlib.sha256(data).digest() and pieces >= 3
        reply = await theirs.receive(timeout=DEADLINE)
        assert reply.parent == mid and reply.text == "that was the file"
        own = await group.receive(timeout=DEADLINE)  # deliver_own: the sender reads it too
        assert own.mid == mid and await group.stream(own).read() == data


async def test_async_and_plain_iterables_and_empty_bodies() -> None:
    channel = bus()
    async with Node(NodeConfig(channel=channel, deliver_own=False)) as alice, \
            Node(NodeConfig(channel=channel)) as bob:
        group = await alice.create_group("files")
        theirs = await bob.join(group.gid, timeout=10.0)

        async def produce() -> AsyncIterator[bytes]:
            for i in range(50):
                yield bytes([i]) * 1000
                await asyncio.sleep(0)

        await group.send_stream(produce())
        await group.send_stream([b"abc", b"", b"def"])
        await group.send_stream(b"")
        bodies = [await theirs.stream(await theirs.receive(timeout=DEADLINE)).read()
                  for _ in range(3)]
        assert bodies == [b"".join(bytes([i]) * 1000 for i in range(50)), b"abcdef", b""]


async def test_a_source_that_fails_gives_the_stream_up_for_its_readers() -> None:
    channel = bus()
    async with Node(NodeConfig(channel=channel, deliver_own=False)) as alice, \
            Node(NodeConfig(channel=channel)) as bob:
        group = await alice.create_group("files")
        theirs = await bob.join(group.gid, timeout=10.0)

        class Broken(Exception):
            pass

        def source() -> object:
            yield bytes(100_000)
            raise Broken

        with pytest.raises(Broken):
            await group.send_stream(source())
        head = await theirs.receive(timeout=DEADLINE)
        with pytest.raises(StreamError) as caught:
            await asyncio.wait_for(theirs.stream(head).read(), DEADLINE)
        assert caught.value.reason == "aborted"


async def test_send_refuses_the_head_marker_and_stream_refuses_plain_messages() -> None:
    async with Node(NodeConfig(channel=bus())) as alice:
        group = await alice.create_group("files")
        with pytest.raises(UsageError):
            await group.send(STREAM_MAGIC + b"forged")
        await group.send(b"\x00 a NUL first is fine")
        plain = await group.receive(timeout=DEADLINE)
        assert not plain.is_stream
        with pytest.raises(UsageError):
            group.stream(plain)
        with pytest.raises(UsageError):
            await group.send_stream("text is not bytes")


async def test_a_body_in_data_dir_outlives_a_restart(tmp_path: Path) -> None:
    data = random.Random(2).randbytes(200_000)
    channel = bus()
    config = NodeConfig(channel=channel, pid="keeper", data_dir=tmp_path / "keeper")
    async with Node(config) as alice:
        group = await alice.create_group("files")
        mid = await group.send_stream(data)
        gid = group.gid
    assert sorted(p.suffix for p in (tmp_path / "keeper" / "streams").iterdir()) == [
        ".body", ".json"]
    async with Node(config) as again:
        [head] = [m for m in again.history(gid) if m.mid == mid]
        assert await again.group(gid).stream(head).read() == data
