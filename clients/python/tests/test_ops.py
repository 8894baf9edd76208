"""Every operation of CONTROL.md, and its documented errors, against real ``huddle run`` nodes."""

from __future__ import annotations

import os
import socket
import stat
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import Cluster, Trio, take, wait_until
from huddle import (
    ActivityEvent,
    Client,
    AttachmentEvent,
    Diagnose,
    DiagnoseJoining,
    ErrorCode,
    HuddleError,
    MemberEvent,
    MessageEvent,
    NodeNotRunning,
)


def tag() -> str:
    return uuid.uuid4().hex[:10]


def test_the_default_path_is_huddle_control(trio: Trio, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUDDLE_CONTROL", trio.b.control)
    with Client() as b:
        assert b.path == trio.b.control and b.status().member == trio.b.member


def test_status_and_members(trio: Trio) -> None:
    with trio.a.client() as a:
        status = a.status()
        assert (status.member, status.name, status.addr, status.members) == (trio.a.member, "a", trio.a.addr, 3)
        assert len(status.session) == 16 and len(status.node) == 64 and status.uptime_ms > 0
        assert isinstance(status.clock, dict) and isinstance(status.baseline, dict)
        assert status.epoch is not None and status.epoch >= 0
        members = a.members()
        assert sorted(m.name for m in members) == ["a", "b", "c"]
        assert [m.member for m in members if m.self_] == [trio.a.member]
        assert {m.state for m in members} == {"alive"} and all(m.incarnation >= 0 for m in members)
        assert {m.member for m in members} == {trio.a.member, trio.b.member, trio.c.member}


def test_send_broadcast_directed_and_unreliable_and_their_message_events(trio: Trio) -> None:
    t = tag()

    def mine(event: MessageEvent) -> bool:
        return t in (event.text or "") or event.data.endswith(t.encode())

    with trio.a.client() as a, trio.b.client() as b, trio.c.client() as c, a.events(topics=["messages"]) as at_a, \
            b.events(topics=["messages"]) as at_b, c.events(topics=["messages"]) as at_c:
        broadcast = a.send(f"hello {t}")
        assert broadcast.seq is not None and broadcast.msg
        directed = a.send(b"\x00\xff" + t.encode(), to=[trio.c.member])
        assert directed.seq is None
        unreliable = a.send(f"datagram {t}", reliable=False)
        assert unreliable.seq is None
        end = a.send(f"end {t}")

        # The sender's own stream has all four (the datagram too: it is delivered locally).
        own = {e.msg: e for e in take(at_a, MessageEvent, mine, 3)}
        assert set(own) == {broadcast.msg, unreliable.msg, end.msg}
        datagram = own[unreliable.msg]
        assert (datagram.reliable, datagram.seq, datagram.text) == (False, None, f"datagram {t}")

        # c: the broadcasts in seq order and the message directed to it (the datagram, best effort,
        # is not waited for).
        at_c_got = {e.msg: e for e in take(at_c, MessageEvent, lambda e: e.msg in (broadcast.msg, directed.msg, end.msg), 3)}
        hello = at_c_got[broadcast.msg]
        assert (hello.text, hello.data, hello.seq, hello.to, hello.reliable, hello.from_) == (
            f"hello {t}", f"hello {t}".encode(), broadcast.seq, None, True, trio.a.member)
        secret = at_c_got[directed.msg]
        assert secret.data == b"\x00\xff" + t.encode() and secret.text is None and secret.to == [trio.c.member]
        assert secret.from_ == trio.a.member and secret.reliable

        # b gets a's broadcasts in seq order, and never the message directed to c.
        at_b_got = take(at_b, MessageEvent, lambda e: e.msg in (broadcast.msg, directed.msg, end.msg), 2)
        assert [e.msg for e in at_b_got] == [broadcast.msg, end.msg]
        assert at_b_got[1].seq == end.seq == (broadcast.seq or 0) + 1


def test_activity_set_get_and_events(trio: Trio) -> None:
    value = {"game": "chess", "tag": tag()}
    with trio.a.client() as a, trio.b.client() as b, b.events(topics=["activity"]) as at_b:
        a.activity_set(value)
        event = take(at_b, ActivityEvent, lambda e: e.activity == value)[0]
        assert event.set_by == trio.a.member
        current = wait_until("b to hold a's activity", lambda: b.activity_get() if b.activity_get().activity == value else None)
        assert current.set_by == trio.a.member


def test_attachments_add_list_get_remove_and_events(trio: Trio, scratch: Path) -> None:
    data = os.urandom(300_000)  # two chunks of 256 KiB
    source = scratch / "photo.bin"
    source.write_bytes(data)
    with trio.a.client() as a, trio.b.client() as b, trio.c.client() as c, \
            c.events(topics=["attachments"]) as at_c:
        added = b.attach_add(source, name="holiday.bin", meta={"location": [120, 80]})
        assert (added.name, added.size, added.meta, added.from_) == ("holiday.bin", 300_000, {"location": [120, 80]}, trio.b.member)
        assert (added.chunks, added.have, added.complete, added.chunk_size) == (2, 2, True, 262144)
        assert trio.b.member in added.holders and added.state in ("announced", "replicated")

        listed = wait_until("a to list b's attachment", lambda: [x for x in a.attach_list() if x.id == added.id] or None)
        assert listed[0].name == "holiday.bin"
        out = scratch / "fetched.bin"
        fetched = a.attach_get(listed[0], out)
        assert fetched.path == str(out) and fetched.attachment.id == added.id and fetched.attachment.complete
        assert out.read_bytes() == data

        changes = take(at_c, AttachmentEvent, lambda e: e.attachment.id == added.id and e.change in ("added", "complete"), 2)
        assert [e.change for e in changes] == ["added", "complete"]

        b.attach_remove(added)
        take(at_c, AttachmentEvent, lambda e: e.attachment.id == added.id and e.change == "removed")

        def refused_at_a() -> HuddleError | None:
            try:
                a.attach_get(added.id, scratch / "again.bin", wait=False)
            except HuddleError as error:
                return error
            return None

        assert wait_until("the removal to reach a", refused_at_a).code == ErrorCode.NOT_FOUND


def test_stats(trio: Trio) -> None:
    with trio.a.client() as a:
        a.send(f"counted {tag()}")
        stats = a.stats()
        assert stats.messages_sent >= 1 and stats.links >= 2
        assert stats.bytes_sent.total == stats.bytes_sent.gossip + stats.bytes_sent.messages + stats.bytes_sent.chunks
        assert stats.bytes_received.total > 0
        assert min(stats.chunks_served, stats.chunks_fetched, stats.retransmits, stats.messages_delivered) >= 0


def test_error_codes(trio: Trio, scratch: Path) -> None:
    with trio.a.client() as a, trio.c.client() as c:
        with pytest.raises(HuddleError) as e:
            a.send("x" * (64 * 1024 + 1))
        assert (e.value.code, e.value.op) == (ErrorCode.TOO_LARGE, "send") and "65536" in e.value.message
        with pytest.raises(HuddleError) as e:
            a.send(b"x" * 1025, reliable=False)
        assert e.value.code == "too_large"
        with pytest.raises(HuddleError) as e:
            a.activity_set("y" * (16 * 1024 + 1))
        assert e.value.code == "too_large"
        with pytest.raises(HuddleError) as e:
            a.attach_add(Path(__file__), meta={"big": "z" * (16 * 1024 + 1)})
        assert e.value.code == "too_large"

        not_found: list[Callable[[], object]] = [
            lambda: a.attach_get("0" * 32, scratch / "x", wait=False),
            lambda: a.attach_remove("0" * 32),
            lambda: a.send("to nobody", to=["0123456789abcdef"]),
            lambda: a.remove("0123456789abcdef"),
            lambda: a.attach_add(scratch / "no such file"),
        ]
        for action in not_found:
            with pytest.raises(HuddleError) as e:
                action()
            assert e.value.code == "not_found", e.value

        bad: list[Callable[[], object]] = [
            lambda: a.request("no.such.op"),
            lambda: a.request("send", {"text": 5}),
            lambda: a.request("attach.get", {"id": "x", "path": "relative/path"}),
            lambda: a.send("x", to=["not a member"]),
            lambda: a.invite(ttl_ms=10),
            lambda: a.remove(trio.a.member),
            lambda: a.events(topics=["no such topic"]),
        ]
        for action in bad:
            with pytest.raises(HuddleError) as e:
                action()
            assert e.value.code == "bad_request", e.value
        # A line longer than a node reads is refused before it is sent, with the node's code.
        with pytest.raises(HuddleError) as e:
            a.send("y" * (1 << 20))
        assert e.value.code == "bad_request"

        with pytest.raises(HuddleError) as e:
            a.join("127.0.0.1:1")
        assert e.value.code == "unavailable"

        small = scratch / "small.txt"
        small.write_text("mine")
        mine = a.attach_add(small)
        wait_until("c to know a's attachment", lambda: any(x.id == mine.id for x in c.attach_list()))
        with pytest.raises(HuddleError) as e:
            c.attach_remove(mine.id)  # only the uploader (or an admin) may
        assert e.value.code == "not_member"
        a.attach_remove(mine)

        # After every error the connection still works.
        assert a.status().member == trio.a.member


def test_attach_get_that_cannot_finish_in_time_says_timeout_and_without_wait_unavailable(trio: Trio, scratch: Path) -> None:
    for size in (30_000_000, 80_000_000):
        big = scratch / f"big-{size}.bin"
        with open(big, "wb") as out:
            out.write(os.urandom(size))
        with trio.a.client() as a, trio.b.client() as b:
            added = a.attach_add(big)
            wait_until("b to know the attachment", lambda: any(x.id == added.id for x in b.attach_list()), interval=0.005)
            try:
                b.attach_get(added.id, scratch / "out.bin", timeout_ms=0)
            except HuddleError as timed_out:
                assert timed_out.code == ErrorCode.TIMEOUT, timed_out
                try:
                    b.attach_get(added.id, scratch / "out.bin", wait=False)
                except HuddleError as incomplete:
                    assert incomplete.code == ErrorCode.UNAVAILABLE, incomplete
                a.attach_remove(added)
                return
            a.attach_remove(added)  # b fetched it all at once: try a larger file
    pytest.fail("b fetched even 80 MB before attach.get could time out")


def test_invite_pairs_a_new_node(cluster: Cluster) -> None:
    host = cluster.start("host")
    with host.client() as c:
        invite = c.invite(ttl_ms=120_000, uses=1)
        assert invite.addr == host.addr and invite.expires_ms == 120_000 and invite.code
        key_out = cluster.root / "guest.key"
        guest = cluster.start("guest", join=host, use_key=False, args=["--invite", invite.code, "--key-out", str(key_out)])
        cluster.wait_alive([host, guest], 2)
        assert stat.S_IMODE(key_out.stat().st_mode) == 0o600
        assert key_out.read_bytes() == cluster.key.read_bytes()
        assert guest.member in {m.member for m in c.members()}


def test_diagnose(cluster: Cluster) -> None:
    node = cluster.start("doc")
    with node.client() as c:
        report = c.diagnose()
        assert report["epoch"] == 0 and report["addr"] == node.addr
        assert report["key_file"]["mode"] == "600"
        [me] = report["members"]
        assert me["self"] is True and me["tcp"]["ok"] is True and me["udp"]["ok"] is True
        # The node itself has no round trip or skew; nobody else is measured.
        assert me["rtt_ms"] is None and me["clock_skew_ms"] is None and report["clock_skew_ms"] is None
        # Every field the node returns is one `Diagnose` types, and the other way round.
        assert set(report) == Diagnose.__required_keys__ | Diagnose.__optional_keys__
        assert report["joining"] == []


def test_diagnose_lists_a_join_address_that_never_answers(cluster: Cluster) -> None:
    # A loopback port nothing listens on: the join is refused, again and again.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        silent = f"127.0.0.1:{probe.getsockname()[1]}"
    node = cluster.start("lonely", args=["--join", silent])
    with node.client() as c:
        def joining() -> list[DiagnoseJoining]:
            return c.diagnose()["joining"]

        wait_until("the join address to be reported", lambda: bool(joining()), context=cluster.logs)
        [entry] = joining()
        assert set(entry) == DiagnoseJoining.__required_keys__
        assert entry["addr"] == silent and entry["seconds"] >= 0 and entry["error"]


def test_rekey_and_remove(cluster: Cluster) -> None:
    x = cluster.start("x")
    y = cluster.start("y", join=x)
    z = cluster.start("z", join=x)
    cluster.wait_alive([x, y, z], 3)
    with x.client() as cx, y.client() as cy, z.client() as cz, cx.events(topics=["members"]) as at_x:
        before = cx.status().epoch or 0
        rekeyed = cx.rekey()
        assert rekeyed > before
        wait_until("y to use the new epoch", lambda: cy.status().epoch == rekeyed, context=cluster.logs)

        removed = cx.remove(z.member)
        assert removed > rekeyed
        event = take(at_x, MemberEvent, lambda e: e.change == "removed" and e.member.member == z.member)[0]
        assert event.by == x.member and event.member.state == "removed"
        assert {m.member: m.state for m in cx.members()}[z.member] == "removed"
        wait_until("y to use the epoch without z", lambda: cy.status().epoch == removed, context=cluster.logs)
        # z holds no key of the new epoch: it may not rotate the session any more.
        with pytest.raises(HuddleError) as e:
            cz.rekey()
        assert e.value.code == "not_member"


def test_join_then_leave(cluster: Cluster) -> None:
    p = cluster.start("p")
    q = cluster.start("q")  # not joined: a session of its own until it joins p
    with p.client() as cp, q.client() as cq, cp.events(topics=["members"]) as at_p:
        assert cq.status().members == 1
        assert cq.join(p.addr) >= 2
        take(at_p, MemberEvent, lambda e: e.change == "joined" and e.member.member == q.member)
        handed_off = cq.leave(timeout_ms=5_000)
        assert handed_off >= 0
        assert q.process.wait(timeout=60) == 0, q.log_text()
        take(at_p, MemberEvent, lambda e: e.change == "left" and e.member.member == q.member)
        with pytest.raises(ConnectionError) as e:
            cq.status()
        assert isinstance(e.value, NodeNotRunning) and q.control in str(e.value)
