"""Event streams against real nodes: ``since`` across a reconnect, and a reader too slow for the
node, which drops it with ``overflow`` — the stream resumes by itself, no event twice or missing."""

from __future__ import annotations

import uuid

from conftest import OVERFLOW_COUNT, OVERFLOW_SIZE, Cluster, Trio, flood, take, wait_until
from huddle import MessageEvent


def test_since_across_a_reconnect_delivers_each_event_once(trio: Trio) -> None:
    t = uuid.uuid4().hex[:10]

    def tagged(event: MessageEvent) -> bool:
        return (event.text or "").startswith(t)

    with trio.a.client() as a, trio.b.client() as b:
        first = b.events(topics=["messages"])
        start = first.cursor
        assert start is not None and start == first.latest
        sent = [a.send(f"{t} one {i}") for i in range(5)]
        got = take(first, MessageEvent, tagged, 5)
        assert [e.msg for e in got] == [s.msg for s in sent]
        cursor = first.cursor
        assert cursor == got[-1].cursor
        first.close()

        # Sent while nobody is subscribed at b.
        sent += [a.send(f"{t} two {i}") for i in range(5)]
        last_seq = sent[-1].seq or 0
        wait_until("b to deliver a's messages", lambda: b.status().clock.get(trio.a.member, 0) >= last_seq)

        with b.events(topics=["messages"], since=cursor) as second:
            again = take(second, MessageEvent, tagged, 5)
            assert [e.text for e in again] == [f"{t} two {i}" for i in range(5)]
            assert all(e.cursor > cursor for e in again)
            assert second.get(timeout=0.3) is None, "nothing more after the replay"

        with b.events(topics=["messages"], since=start) as replay:
            everything = take(replay, MessageEvent, tagged, 10)
            assert [e.msg for e in everything] == [s.msg for s in sent]
            cursors = [e.cursor for e in everything]
            assert cursors == sorted(set(cursors))


def test_a_reader_too_slow_for_the_node_resumes_by_itself_with_every_message_once(cluster: Cluster) -> None:
    solo = cluster.start("solo")
    t = uuid.uuid4().hex[:8]
    with solo.client() as c, c.events(topics=["messages"], timeout=60) as stream:
        flood(solo.control, OVERFLOW_COUNT, OVERFLOW_SIZE, t)  # the stream reads nothing meanwhile
        cursors: list[int] = []
        prefixes: list[str] = []
        for event in stream:
            assert isinstance(event, MessageEvent)
            cursors.append(event.cursor)
            prefixes.append((event.text or "")[: len(t) + 8])
            if len(cursors) == OVERFLOW_COUNT:
                break
        assert stream.overflows, "the node never dropped the slow reader: the resume was not exercised"
        assert prefixes == [f"{t} {i:06d} " for i in range(OVERFLOW_COUNT)], "a message missing, repeated or out of order"
        assert cursors == list(range(cursors[0], cursors[0] + OVERFLOW_COUNT)), "cursors are consecutive"
        assert stream.get(timeout=0.2) is None
        overflow = stream.overflows[0]
        assert cursors[0] <= overflow.resume < cursors[-1]
