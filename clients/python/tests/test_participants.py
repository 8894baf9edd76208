"""The participant ops (README, "Participants": an extension of CONTROL.md) against real nodes:
a program joins an activity on its connection, every node shows it, and it is gone when it leaves
or its connection closes."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from conftest import Trio, wait_until
from huddle import Client, ErrorCode, HuddleError, Participant
from huddle.aio import AsyncClient


def ids(client: Client, activity: str) -> set[str] | None:
    return {p.id for p in client.participants(activity=activity)}


def test_a_program_joins_every_node_shows_it_and_it_goes_when_it_leaves_or_disconnects(trio: Trio) -> None:
    activity = "draw-" + uuid.uuid4().hex[:8]
    with trio.a.client() as a, trio.b.client() as b, trio.c.client() as watcher:
        joined = a.participant_join(activity)
        assert isinstance(joined, Participant) and len(joined.id) == 16
        assert (joined.member, joined.activity, joined.self_, joined.name) == (trio.a.member, activity, True, "a")

        # b joins too; a node without a program (c) is no participant.
        other = b.participant_join(activity)
        both = {joined.id, other.id}
        wait_until("c to show both participants", lambda: ids(watcher, activity) == both)
        at_c = {p.id: p for p in watcher.participants(activity=activity)}
        assert at_c[joined.id].member == trio.a.member and not at_c[joined.id].self_
        assert trio.c.member not in {p.member for p in at_c.values()}
        assert joined.id in {p.id for p in watcher.participants()}  # without the filter: every activity

        # Leaving is local: a's program goes, a's node stays in the session.
        a.participant_leave(joined)
        wait_until("c to see a's program leave", lambda: ids(watcher, activity) == {other.id})
        assert a.status().members == 3

        # A program whose connection closes is no longer a participant.
        b.close()
        wait_until("c to see b's program gone with its connection", lambda: ids(watcher, activity) == set())


def test_participant_errors(trio: Trio) -> None:
    with trio.a.client() as a:
        with pytest.raises(HuddleError) as e:
            a.participant_leave("0123456789abcdef")
        assert (e.value.code, e.value.op) == (ErrorCode.NOT_FOUND, "participant.leave")
        with pytest.raises(HuddleError) as e:
            a.participant_join("")
        assert e.value.code == ErrorCode.BAD_REQUEST
        with pytest.raises(HuddleError) as e:
            a.participant_join("x" * 201)
        assert e.value.code == ErrorCode.BAD_REQUEST


def test_async_participant_ops(trio: Trio) -> None:
    activity = "async-" + uuid.uuid4().hex[:8]

    async def run() -> None:
        async with AsyncClient(trio.a.control) as a, AsyncClient(trio.b.control) as b:
            joined = await a.participant_join(activity)
            assert joined.self_ and joined.activity == activity

            async def seen_at_b() -> set[str]:
                return {p.id for p in await b.participants(activity=activity)}

            for _ in range(1200):
                if await seen_at_b() == {joined.id}:
                    break
                await asyncio.sleep(0.05)
            assert await seen_at_b() == {joined.id}
            await a.participant_leave(joined.id)
            assert joined.id not in {p.id for p in await a.participants()}

    asyncio.run(run())
