"""The asyncio client against real nodes: the operations, errors, event streams (``async for``,
``since``) and the overflow resume."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from conftest import OVERFLOW_COUNT, OVERFLOW_SIZE, Cluster, Trio, flood
from huddle import ActivityEvent, AttachmentEvent, ErrorCode, HuddleError, MessageEvent, NodeNotRunning
from huddle.aio import AsyncClient


def test_async_operations_and_events(trio: Trio, scratch: Path) -> None:
    t = uuid.uuid4().hex[:10]
    data = os.urandom(5000)
    (scratch / "notes.bin").write_bytes(data)

    async def run() -> None:
        async with AsyncClient(trio.a.control) as a, AsyncClient(trio.b.control) as b:
            status = await a.status()
            assert status.member == trio.a.member and status.members == 3
            assert {m.member for m in await b.members()} == {trio.a.member, trio.b.member, trio.c.member}
            assert (await a.stats()).links >= 2

            async with b.events(topics=["messages", "activity", "attachments"], timeout=60) as stream:
                sent = await a.send(f"{t} hello")
                directed = await a.send(t.encode() + b"\xff", to=[trio.b.member])
                await a.activity_set({"tag": t})
                added = await a.attach_add(scratch / "notes.bin", meta={"tag": t})
                seen: dict[str, object] = {}
                async for event in stream:
                    if isinstance(event, MessageEvent) and event.msg in (sent.msg, directed.msg):
                        seen[event.msg] = event
                    elif isinstance(event, ActivityEvent) and event.activity == {"tag": t}:
                        seen["activity"] = event
                    elif isinstance(event, AttachmentEvent) and event.attachment.id == added.id and event.change == "complete":
                        seen["attachment"] = event
                    if len(seen) == 4:
                        break
                cursor = stream.cursor
            hello = seen[sent.msg]
            assert isinstance(hello, MessageEvent) and hello.text == f"{t} hello" and hello.from_ == trio.a.member
            secret = seen[directed.msg]
            assert isinstance(secret, MessageEvent) and secret.to == [trio.b.member] and secret.text is None

            # Resumed from the cursor: only what came after it.
            after = await a.send(f"{t} after")
            resumed = await b.subscribe(topics=["messages"], since=cursor, timeout=60)
            try:
                while True:
                    later = await resumed.get(timeout=60)
                    assert later is not None, "the message sent after the cursor never came"
                    assert not (isinstance(later, MessageEvent) and later.msg in (sent.msg, directed.msg))
                    if isinstance(later, MessageEvent) and later.msg == after.msg:
                        break
            finally:
                await resumed.close()

            assert (await b.activity_get()).activity == {"tag": t}
            assert any(x.id == added.id for x in await b.attach_list())
            fetched = await b.attach_get(added, scratch / "copy.bin")
            assert Path(fetched.path).read_bytes() == data
            await a.attach_remove(added.id)
            invite = await a.invite(ttl_ms=5_000)
            assert invite.addr == trio.a.addr and invite.expires_ms == 5_000

            with pytest.raises(HuddleError) as too_large:
                await a.send(b"x" * 2000, reliable=False)
            assert too_large.value.code == ErrorCode.TOO_LARGE
            with pytest.raises(HuddleError) as bad:
                await a.request("no.such.op")
            assert bad.value.code == ErrorCode.BAD_REQUEST
            with pytest.raises(HuddleError) as unknown:
                await a.attach_get("0" * 32, scratch / "nothing", wait=False)
            assert unknown.value.code == ErrorCode.NOT_FOUND
            assert (await a.status()).member == trio.a.member

        with pytest.raises(NodeNotRunning, match="nobody.sock"):
            await AsyncClient(scratch / "nobody.sock").status()

    asyncio.run(run())


def test_async_concurrent_requests_on_one_client(trio: Trio) -> None:
    async def run() -> None:
        async with AsyncClient(trio.c.control) as c:
            sends = asyncio.gather(*(c.send(f"concurrent {i}") for i in range(20)))
            reads = asyncio.gather(c.status(), c.members())
            sent, (status, members) = await asyncio.gather(sends, reads)
            seqs = [s.seq for s in sent if s.seq is not None]
            assert seqs == sorted(seqs) and len(set(seqs)) == 20  # each request got its own reply
            assert status.member == trio.c.member and len(members) == 3

    asyncio.run(run())


def test_async_reader_too_slow_for_the_node_resumes_by_itself(cluster: Cluster) -> None:
    solo = cluster.start("solo")
    t = uuid.uuid4().hex[:8]

    async def run() -> None:
        async with AsyncClient(solo.control) as c, c.events(topics=["messages"], timeout=60) as stream:
            await asyncio.get_running_loop().run_in_executor(None, flood, solo.control, OVERFLOW_COUNT, OVERFLOW_SIZE, t)
            prefixes = []
            async for event in stream:
                assert isinstance(event, MessageEvent)
                prefixes.append((event.text or "")[: len(t) + 8])
                if len(prefixes) == OVERFLOW_COUNT:
                    break
            assert stream.overflows, "the node never dropped the slow reader"
            assert prefixes == [f"{t} {i:06d} " for i in range(OVERFLOW_COUNT)]
            assert await stream.get(timeout=0.2) is None

    asyncio.run(run())
