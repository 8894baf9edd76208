"""The client against a scripted socket (``fakenode``): what a real node cannot be made to do on
demand — a late reply, a reply to another request, a broken line, a dropped connection — and the
overflow resume checked line by line (the real overflow is in test_events.py)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakenode import FakeNode, Send, message, ok
from huddle import (
    Client,
    ConnectionClosed,
    MessageEvent,
    NodeNotRunning,
    OverflowEvent,
    ProtocolError,
    UntrustedSocket,
)
from huddle.aio import AsyncClient


@pytest.fixture
def sockdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="hpy-fake-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def overflowing_node(path: str) -> FakeNode:
    """Connection 0: subscribed at cursor 10, events 11–13, then overflow (resume 13) and close.
    Connection 1 (the resume): replays 12 and 13 again (a duplicate the client must drop), then
    14 and 15."""

    def handler(number: int, request: dict[str, Any], send: Send) -> bool:
        assert request["op"] == "subscribe"
        if "since" not in request:
            send(ok(request, cursor=10))
            for cursor in (11, 12, 13):
                send(message(cursor, f"m{cursor}"))
            send({"event": "overflow", "cursor": 30, "resume": 13})
            return True
        send(ok(request, cursor=30))
        for cursor in (12, 13, 14, 15):
            send(message(cursor, f"m{cursor}"))
        return False

    return FakeNode(path, handler)


def test_overflow_resubscribes_with_since_and_drops_duplicates(sockdir: Path) -> None:
    node = overflowing_node(str(sockdir / "n.sock"))
    try:
        with Client(node.path, timeout=5) as client, client.events(topics=["messages"], timeout=5) as stream:
            texts = [e.text for e in (next(stream) for _ in range(5)) if isinstance(e, MessageEvent)]
            assert texts == ["m11", "m12", "m13", "m14", "m15"]
            assert stream.get(timeout=0.2) is None
            assert [o.resume for o in stream.overflows] == [13] and stream.cursor == 15
        assert [r for _, r in node.requests] == [{"op": "subscribe", "id": 1, "topics": ["messages"]},
                                                 {"op": "subscribe", "id": 1, "topics": ["messages"], "since": 13}]
        assert len({n for n, _ in node.requests}) == 2, "the resume is on a connection of its own"
    finally:
        node.close()


def test_async_overflow_resubscribes_with_since_and_drops_duplicates(sockdir: Path) -> None:
    node = overflowing_node(str(sockdir / "n.sock"))

    async def run() -> list[str | None]:
        async with AsyncClient(node.path, timeout=5) as client, client.events(topics=["messages"], timeout=5) as stream:
            texts = []
            async for event in stream:
                assert isinstance(event, MessageEvent)
                texts.append(event.text)
                if len(texts) == 5:
                    break
            assert await stream.get(timeout=0.2) is None and stream.cursor == 15
            return texts

    try:
        assert asyncio.run(run()) == ["m11", "m12", "m13", "m14", "m15"]
        assert [r.get("since") for _, r in node.requests] == [None, 13]
    finally:
        node.close()


def test_without_resume_the_overflow_ends_the_stream(sockdir: Path) -> None:
    node = overflowing_node(str(sockdir / "n.sock"))
    try:
        with Client(node.path, timeout=5) as client:
            events = list(client.events(resume=False, timeout=5))
            assert [e.cursor for e in events] == [11, 12, 13, 30] and isinstance(events[-1], OverflowEvent)
            assert len(node.requests) == 1
    finally:
        node.close()


def test_a_late_reply_is_dropped_and_the_connection_serves_the_next_request(sockdir: Path) -> None:
    held: list[dict[str, Any]] = []

    def handler(number: int, request: dict[str, Any], send: Send) -> None:
        if request["op"] == "activity.get" and not held:
            held.append(request)  # answered late, after the client gave up
            return
        for late in held:
            send(ok(late, activity="late", set_by=None))
        held.clear()
        send(ok(request, activity="fresh", set_by=None))

    node = FakeNode(str(sockdir / "n.sock"), handler)
    try:
        with Client(node.path, timeout=5) as client:
            started = time.monotonic()
            with pytest.raises(TimeoutError, match=f"activity.get.*{node.path}"):
                client.activity_get(timeout=0.3)
            assert time.monotonic() - started < 3
            assert client.activity_get().activity == "fresh"
            assert len({n for n, _ in node.requests}) == 1, "the same connection served both"
    finally:
        node.close()


def test_a_reply_to_another_request_or_a_broken_line_is_a_protocol_error(sockdir: Path) -> None:
    def handler(number: int, request: dict[str, Any], send: Send) -> None:
        count = len(node.requests)
        if count == 1:
            send({"id": 999, "ok": True, "activity": None, "set_by": None})
        elif count == 2:
            send(b"this is not json\n")
        elif count == 3:
            send({"id": request["id"], "ok": False, "error": {"code": "some_new_code", "message": "later node"}})
        else:
            send(ok(request, activity=None, set_by="x"))

    node = FakeNode(str(sockdir / "n.sock"), handler)
    try:
        with Client(node.path, timeout=5) as client:
            with pytest.raises(ProtocolError, match="999"):
                client.activity_get()
            with pytest.raises(ProtocolError, match="not JSON"):
                client.activity_get()  # on a new connection: the broken one was dropped
            with pytest.raises(Exception) as unknown_code:
                client.activity_get()
            assert getattr(unknown_code.value, "code", None) == "some_new_code"
            assert client.activity_get().set_by == "x"
    finally:
        node.close()


def test_a_node_that_closes_mid_request_raises_connection_closed_and_the_client_reconnects(sockdir: Path) -> None:
    def handler(number: int, request: dict[str, Any], send: Send) -> bool:
        if number == 0:
            return True
        send(ok(request, activity=1, set_by=None))
        return False

    node = FakeNode(str(sockdir / "n.sock"), handler)
    try:
        with Client(node.path, timeout=5) as client:
            with pytest.raises(ConnectionClosed, match=node.path):
                client.activity_get()
            assert client.activity_get().activity == 1
    finally:
        node.close()


def test_the_async_client_times_out_keeps_the_connection_and_reports_a_closed_node(sockdir: Path) -> None:
    answered: list[int] = []

    def handler(number: int, request: dict[str, Any], send: Send) -> bool:
        if number == 0 and not answered:
            answered.append(1)
            return False  # no reply: the first request times out
        if number == 0:
            send(ok({"id": 1}, activity="late", set_by=None))
            send(ok(request, activity="fresh", set_by=None))
            return False
        return True

    node = FakeNode(str(sockdir / "n.sock"), handler)

    async def run() -> None:
        client = AsyncClient(node.path, timeout=5)
        with pytest.raises(TimeoutError, match="activity.get"):
            await client.activity_get(timeout=0.3)
        assert (await client.activity_get()).activity == "fresh"
        await client.close()
        with pytest.raises(ConnectionClosed, match=node.path):
            await client.activity_get()  # connection 1: closed at once

    try:
        asyncio.run(run())
    finally:
        node.close()


def test_no_node_is_a_connection_error_naming_the_path(sockdir: Path) -> None:
    missing = str(sockdir / "nobody.sock")
    with pytest.raises(NodeNotRunning, match=missing) as raised:
        Client(missing).status()
    assert isinstance(raised.value, ConnectionError) and raised.value.path == missing
    stale = sockdir / "stale.sock"
    leftover = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    leftover.bind(str(stale))  # a socket file nothing listens on (a killed node's)
    leftover.close()
    with pytest.raises(NodeNotRunning, match=str(stale)):
        with Client(stale):
            pass

    async def run() -> None:
        with pytest.raises(NodeNotRunning, match=missing):
            await AsyncClient(missing).status()

    asyncio.run(run())


def test_a_socket_another_user_could_replace_is_refused(sockdir: Path) -> None:
    shared = sockdir / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # writable by others, not sticky
    with pytest.raises(UntrustedSocket, match="not sticky"):
        Client(shared / "n.sock").status()
    if os.geteuid() == 0:  # root can give a file to another user
        private = sockdir / "private"
        private.mkdir(mode=0o700)
        node = FakeNode(str(private / "n.sock"), lambda n, r, s: None)
        try:
            os.chown(node.path, 4242, 4242)
            with pytest.raises(UntrustedSocket, match="uid 4242"):
                Client(node.path).status()
        finally:
            node.close()


def test_a_connection_the_node_closed_between_requests_is_replaced_before_the_next(sockdir: Path) -> None:
    def handler(number: int, request: dict[str, Any], send: Send) -> bool:
        send(ok(request, activity=number, set_by=None))
        return True  # served one request, then gone (a node restarted meanwhile, say)

    node = FakeNode(str(sockdir / "n.sock"), handler)

    async def run() -> list[object]:
        async with AsyncClient(node.path, timeout=5) as client:
            first = (await client.activity_get()).activity
            await asyncio.sleep(0.2)
            return [first, (await client.activity_get()).activity]

    try:
        with Client(node.path, timeout=5) as client:
            assert client.activity_get().activity == 0
            time.sleep(0.2)
            assert client.activity_get().activity == 1, "a new connection, and no ConnectionClosed"
        assert asyncio.run(run()) == [2, 3]
    finally:
        node.close()


def test_a_line_longer_than_the_clients_limit_is_a_protocol_error(sockdir: Path) -> None:
    def handler(number: int, request: dict[str, Any], send: Send) -> None:
        send(ok(request, activity="x" * 5000, set_by=None))

    node = FakeNode(str(sockdir / "n.sock"), handler)
    try:
        with Client(node.path, timeout=5, max_line=1000) as client:
            with pytest.raises(ProtocolError, match="limit is 1000"):
                client.activity_get()
        with Client(node.path, timeout=5) as client:
            assert client.activity_get().activity == "x" * 5000
    finally:
        node.close()
