"""Decoding, framing and the subscription's resume logic, without a node (lines as a node writes
them, copied from a real node's output)."""

from __future__ import annotations

import base64
import json

import pytest

from huddle import (
    ActivityEvent,
    AttachmentEvent,
    ErrorCode,
    GapEvent,
    HuddleError,
    Member,
    MemberEvent,
    MessageEvent,
    OverflowEvent,
    ProtocolError,
    Status,
    UnknownEvent,
    default_control_path,
)
from huddle import protocol
from huddle.framing import MAX_REQUEST_LINE, LineBuffer, ReplyMatcher, decode_line, encode_request
from huddle.models import decode_event
from huddle.protocol import Subscription

MEMBER = {"member": "a951dd66e46525fc", "node": "ec33" * 16, "name": "b", "addr": "127.0.0.1:36541",
          "state": "alive", "incarnation": 0, "self": False}
ATTACHMENT = {"id": "17de4d4005d651d47abe23c1964966c7", "name": "blob", "size": 3000, "meta": {"k": 1},
              "from": "745e56e24f49caa2", "chunk_size": 262144, "chunks": 1, "have": 1, "complete": True,
              "holders": ["745e56e24f49caa2"], "state": "announced"}


def test_every_event_of_control_md_decodes_to_its_type_and_keeps_the_line() -> None:
    member = decode_event({"event": "member", "cursor": 1, "change": "removed", "member": MEMBER, "by": "745e56e24f49caa2"})
    assert isinstance(member, MemberEvent) and member.change == "removed" and member.by == "745e56e24f49caa2"
    assert member.member.self_ is False and member.member.name == "b" and member.member.path is None

    line = {"event": "message", "cursor": 3, "msg": "745e56e24f49caa2-2", "from": "745e56e24f49caa2", "seq": None,
            "deps": {"a951dd66e46525fc": 4}, "to": ["a951dd66e46525fc"], "reliable": False, "data": "AP8=",
            "later": "a field a later node adds"}
    msg = decode_event(line)
    assert isinstance(msg, MessageEvent)
    assert (msg.data, msg.text, msg.seq, msg.deps, msg.to, msg.reliable, msg.from_) == (
        b"\x00\xff", None, None, {"a951dd66e46525fc": 4}, ["a951dd66e46525fc"], False, "745e56e24f49caa2")
    assert msg.raw["later"] == "a field a later node adds"

    attachment = decode_event({"event": "attachment", "cursor": 4, "change": "progress", "attachment": ATTACHMENT})
    assert isinstance(attachment, AttachmentEvent) and attachment.attachment.from_ == "745e56e24f49caa2"
    activity = decode_event({"event": "activity", "cursor": 5, "activity": {"game": "go"}, "set_by": "745e56e24f49caa2"})
    assert isinstance(activity, ActivityEvent) and activity.activity == {"game": "go"}
    gap = decode_event({"event": "gap", "cursor": 6, "member": "745e56e24f49caa2", "from_seq": 3, "to_seq": 9})
    assert isinstance(gap, GapEvent) and (gap.from_seq, gap.to_seq) == (3, 9)
    overflow = decode_event({"event": "overflow", "cursor": 982, "resume": 46})
    assert isinstance(overflow, OverflowEvent) and overflow.resume == 46
    unknown = decode_event({"event": "invite", "cursor": 7, "change": "issued", "nameplate": 6358})
    assert isinstance(unknown, UnknownEvent) and unknown.event == "invite" and unknown.raw["nameplate"] == 6358


def test_a_missing_or_ill_typed_field_is_a_protocol_error_naming_it() -> None:
    with pytest.raises(ProtocolError, match="'cursor'"):
        decode_event({"event": "activity", "activity": None, "set_by": None})
    with pytest.raises(ProtocolError, match="'incarnation'"):
        Member.from_json({**MEMBER, "incarnation": "0"})
    with pytest.raises(ProtocolError, match="'self'"):
        Member.from_json({k: v for k, v in MEMBER.items() if k != "self"})
    with pytest.raises(ProtocolError, match="base64"):
        decode_event({"event": "message", "cursor": 1, "msg": "m", "from": "f", "seq": 1, "deps": {}, "to": None,
                      "reliable": True, "data": "not base64!"})
    with pytest.raises(ProtocolError, match="'members'"):
        Status.from_json({"member": "m", "node": "n", "name": "a", "addr": "x", "session": "s", "members": True,
                          "clock": {}, "baseline": {}, "uptime_ms": 1})


def test_status_fields_control_md_lists_decode_when_a_node_sends_them() -> None:
    status = Status.from_json({"member": "m", "node": "n", "name": "a", "addr": "127.0.0.1:1", "session": "s",
                               "members": 2, "clock": {"m": 3}, "baseline": {}, "uptime_ms": 10, "epoch": 1,
                               "reflexive": ["1.2.3.4:5"], "nat": "easy", "resumed": True, "admins": ["ab" * 32]})
    assert (status.epoch, status.reflexive, status.nat, status.resumed, status.clock) == (1, ["1.2.3.4:5"], "easy", True, {"m": 3})
    assert status.admins == ["ab" * 32]
    member = Member.from_json({**MEMBER, "path": "relayed", "via": "745e56e24f49caa2", "rtt_ms": 1.5})
    assert (member.path, member.via, member.rtt_ms) == ("relayed", "745e56e24f49caa2", 1.5)


def test_default_control_path_is_the_clis() -> None:
    assert default_control_path({"HUDDLE_CONTROL": "/x/h.sock", "XDG_RUNTIME_DIR": "/run/user/7"}) == "/x/h.sock"
    assert default_control_path({"HUDDLE_CONTROL": "", "XDG_RUNTIME_DIR": "/run/user/7"}) == "/run/user/7/huddle.sock"
    import os
    assert default_control_path({"XDG_RUNTIME_DIR": ""}) == f"/tmp/huddle-{os.getuid()}.sock"


def test_requests_are_json_lines_with_an_id_and_the_attachment_id_is_the_request_id() -> None:
    line, expected = encode_request("status", 7, {})
    assert line.endswith(b"\n") and json.loads(line) == {"op": "status", "id": 7} and expected == 7
    call = protocol.attach_get("17de4d4005d651d47abe23c1964966c7", "/tmp/out", timeout_ms=5)
    line, expected = encode_request(call.op, 8, call.fields)
    assert json.loads(line) == {"op": "attach.get", "id": "17de4d4005d651d47abe23c1964966c7", "path": "/tmp/out", "timeout_ms": 5}
    assert expected == "17de4d4005d651d47abe23c1964966c7"
    with pytest.raises(HuddleError) as refused:
        encode_request("send", 9, {"text": "x" * MAX_REQUEST_LINE})
    assert refused.value.code == ErrorCode.BAD_REQUEST


def test_send_bodies_and_recipients() -> None:
    assert protocol.send("hi").fields == {"text": "hi"}
    member = Member.from_json(MEMBER)
    call = protocol.send(b"\x00\x01", to=[member, "745e56e24f49caa2"], reliable=False)
    assert call.fields == {"data": base64.b64encode(b"\x00\x01").decode(), "to": [MEMBER["member"], "745e56e24f49caa2"],
                           "reliable": False}
    with pytest.raises(TypeError):
        protocol.send("hi", to="745e56e24f49caa2")  # one member, not a list
    with pytest.raises(TypeError):
        protocol.send(5)  # type: ignore[arg-type]


def test_lines_split_across_reads_and_the_line_limit_holds() -> None:
    buffer = LineBuffer(max_line=64)
    buffer.feed(b'{"a":1}\n{"b"')
    assert buffer.next_line() == b'{"a":1}' and buffer.next_line() is None and buffer.has_partial
    buffer.feed(b':2}\r\n\n')
    assert decode_line(buffer.next_line() or b"") == {"b": 2} and buffer.next_line() is None
    with pytest.raises(ProtocolError, match="limit"):
        buffer.feed(b"x" * 65)
    with pytest.raises(ProtocolError):
        decode_line(b"[1]")


def test_replies_match_in_order_and_abandoned_replies_are_dropped() -> None:
    matcher = ReplyMatcher()
    first, second = matcher.next_token(), matcher.next_token()
    matcher.sent(first, first)
    matcher.sent(second, "an attachment id")
    matcher.abandon(first)
    assert matcher.match({"id": first, "ok": True}) is None
    assert matcher.match({"id": "an attachment id", "ok": True}) == second
    third = matcher.next_token()
    matcher.sent(third, third)
    assert matcher.match({"id": None, "ok": False}) == third  # a line the node could not parse
    matcher.sent(matcher.next_token(), 4)
    with pytest.raises(ProtocolError, match="answered"):
        matcher.match({"id": 99, "ok": True})


def test_subscription_resumes_from_an_overflow_without_duplicates() -> None:
    sub = Subscription(topics=["messages"], since=None)
    assert sub.request().fields == {"topics": ["messages"]}
    sub.subscribed(10)
    assert sub.cursor == 10
    seen = [sub.event({"event": "activity", "cursor": c, "activity": c, "set_by": None}) for c in (11, 12)]
    assert [e.cursor for e in seen if e] == [11, 12]
    overflow = sub.event({"event": "overflow", "cursor": 40, "resume": 12})
    assert isinstance(overflow, OverflowEvent) and not sub.ended
    assert sub.request().fields == {"topics": ["messages"], "since": 12}
    sub.subscribed(40)
    assert sub.event({"event": "activity", "cursor": 12, "activity": 12, "set_by": None}) is None  # delivered before
    assert sub.event({"event": "activity", "cursor": 13, "activity": 13, "set_by": None}) is not None
    # Retention dropped events: the resume is past what was delivered; the stream follows the node.
    sub.event({"event": "overflow", "cursor": 90, "resume": 50})
    assert sub.request().fields["since"] == 50 and len(sub.overflows) == 2


def test_subscription_that_does_not_resume_ends_at_the_overflow() -> None:
    sub = Subscription(topics=None, since=5, resume=False)
    assert sub.request().fields == {"since": 5}
    sub.subscribed(9)
    assert sub.cursor == 5
    assert isinstance(sub.event({"event": "overflow", "cursor": 9, "resume": 6}), OverflowEvent) and sub.ended


def test_a_since_beyond_the_nodes_latest_starts_with_new_events() -> None:
    sub = Subscription(topics=None, since=500)
    sub.subscribed(3)  # a node whose event log is not the one the cursor came from
    assert sub.event({"event": "activity", "cursor": 4, "activity": 1, "set_by": None}) is not None
    with pytest.raises(ValueError):
        Subscription(topics=None, since=-1)
    with pytest.raises(TypeError):
        Subscription(topics="messages", since=None)  # type: ignore[arg-type]
