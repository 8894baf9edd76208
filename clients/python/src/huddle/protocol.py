"""Each operation of CONTROL.md as a request and a reply decoder, and the event subscription's
logic (resuming after ``overflow``), without I/O.

The synchronous :class:`~huddle.Client` and the asyncio :class:`~huddle.aio.AsyncClient` build
every request with the functions here and run the same :class:`Subscription`; they differ only in
how bytes move.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, Union, cast

from .errors import ProtocolError
from .framing import reply_result
from .models import (
    Activity,
    AnyEvent,
    Attachment,
    Diagnose,
    Fetched,
    Fields,
    Invite,
    JSONObject,
    Member,
    OverflowEvent,
    Participant,
    Sent,
    Stats,
    Status,
    decode_event,
)

T = TypeVar("T")

MemberRef = Union[str, Member]
"""A member: its member string, or a :class:`~huddle.models.Member`."""
ParticipantRef = Union[str, Participant]
"""A participant: its program id, or a :class:`~huddle.models.Participant`."""
AttachmentRef = Union[str, Attachment]
"""An attachment: its id, or an :class:`~huddle.models.Attachment`."""
Body = Union[str, bytes, bytearray, memoryview]
"""A message body: ``str`` is sent as ``text``, bytes as ``data`` (base64)."""

DEFAULT_TIMEOUT = 30.0
"""Seconds a client waits for a reply by default (each method takes its own ``timeout``)."""
ATTACH_ADD_TIMEOUT = 600.0
"""Seconds ``attach_add`` waits by default: the node replies once the file is chunked and stored."""
ATTACH_GET_TIMEOUT_MS = 600_000
"""The ``timeout_ms`` ``attach_get`` sends by default (it then waits that long, plus
:data:`REPLY_GRACE`, for the reply)."""
LEAVE_TIMEOUT_MS = 30_000
"""The node's default hand-off bound of ``leave`` (CONTROL.md)."""
REPLY_GRACE = 30.0
"""Seconds a client waits for a reply beyond the wait a request itself names (``timeout_ms``)."""


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request: its ``op`` and fields, how its reply's result fields decode, and how long to
    wait for the reply when the caller does not say (``None``: the client's default)."""

    op: str
    fields: JSONObject
    decode: Callable[[JSONObject], T]
    timeout: float | None = None

    def result(self, reply: JSONObject) -> T:
        """The typed result of the reply line.

        Raises:
            HuddleError: for an error reply.
            ProtocolError: for a reply CONTROL.md does not allow.
        """
        return self.decode(reply_result(reply, self.op))


def _none(_: JSONObject) -> None:
    return None


def _int_field(key: str, what: str) -> Callable[[JSONObject], int]:
    def decode(obj: JSONObject) -> int:
        return Fields(obj, what).integer(key)

    return decode


def _members(obj: JSONObject) -> list[Member]:
    return [Member.from_json(m) for m in Fields(obj, "members reply").objects("members")]


def _attachments(obj: JSONObject) -> list[Attachment]:
    return [Attachment.from_json(a) for a in Fields(obj, "attach.list reply").objects("attachments")]


def _attachment_reply(obj: JSONObject) -> Attachment:
    return Attachment.from_json(Fields(obj, "attach.add reply").obj_field("attachment"))


def _raw_result(obj: JSONObject) -> JSONObject:
    return obj


def member_string(member: MemberRef) -> str:
    """The member string of a member reference."""
    return member.member if isinstance(member, Member) else member


def attachment_id(attachment: AttachmentRef) -> str:
    """The id of an attachment reference."""
    return attachment.id if isinstance(attachment, Attachment) else attachment


def absolute_path(path: str | os.PathLike[str]) -> str:
    """``path`` made absolute against the client's working directory (the node needs absolute
    paths, and resolves nothing against its own)."""
    return os.path.abspath(os.fspath(path))


# MARK: the operations


def raw(op: str, fields: Mapping[str, Any] | None = None, timeout: float | None = None) -> Call[JSONObject]:
    """Any request (an op or field a node adds beyond CONTROL.md): the reply's result fields."""
    return Call(op, dict(fields or {}), _raw_result, timeout)


def status() -> Call[Status]:
    return Call("status", {}, Status.from_json)


def members() -> Call[list[Member]]:
    return Call("members", {}, _members)


def join(addr: str) -> Call[int]:
    return Call("join", {"addr": addr}, _int_field("members", "join reply"))


def send(body: Body, to: Iterable[MemberRef] | None = None, reliable: bool = True) -> Call[Sent]:
    fields: JSONObject = {}
    if isinstance(body, str):
        fields["text"] = body
    elif isinstance(body, (bytes, bytearray, memoryview)):
        fields["data"] = base64.b64encode(bytes(body)).decode("ascii")
    else:
        raise TypeError(f"a message body is str or bytes, not {type(body).__name__}")
    if to is not None:
        if isinstance(to, (str, Member)):
            raise TypeError("'to' is a list of members, not one member")
        fields["to"] = [member_string(m) for m in to]
    if not reliable:
        fields["reliable"] = False
    return Call("send", fields, Sent.from_json)


def attach_add(path: str | os.PathLike[str], name: str | None = None, meta: Any = None,
               timeout: float | None = None) -> Call[Attachment]:
    fields: JSONObject = {"path": absolute_path(path)}
    if name is not None:
        fields["name"] = name
    if meta is not None:
        fields["meta"] = meta
    return Call("attach.add", fields, _attachment_reply, ATTACH_ADD_TIMEOUT if timeout is None else timeout)


def attach_list() -> Call[list[Attachment]]:
    return Call("attach.list", {}, _attachments)


def attach_get(attachment: AttachmentRef, path: str | os.PathLike[str], wait: bool = True,
               timeout_ms: int | None = None, timeout: float | None = None) -> Call[Fetched]:
    fields: JSONObject = {"id": attachment_id(attachment), "path": absolute_path(path)}
    if not wait:
        fields["wait"] = False
    node_wait = ATTACH_GET_TIMEOUT_MS if timeout_ms is None else timeout_ms
    if wait:
        fields["timeout_ms"] = node_wait
    wait_for = (node_wait / 1000 if wait else 0) + REPLY_GRACE if timeout is None else timeout
    return Call("attach.get", fields, Fetched.from_json, wait_for)


def attach_remove(attachment: AttachmentRef) -> Call[None]:
    return Call("attach.remove", {"id": attachment_id(attachment)}, _none)


def activity_get() -> Call[Activity]:
    return Call("activity.get", {}, Activity.from_json)


def activity_set(value: Any) -> Call[None]:
    return Call("activity.set", {"value": value}, _none)


def stats() -> Call[Stats]:
    return Call("stats", {}, Stats.from_json)


def remove(member: MemberRef) -> Call[int]:
    return Call("remove", {"member": member_string(member)}, _int_field("epoch", "remove reply"))


def rekey() -> Call[int]:
    return Call("rekey", {}, _int_field("epoch", "rekey reply"))


def _diagnose(result: JSONObject) -> Diagnose:
    members = result.get("members")
    if not isinstance(members, list) or not all(isinstance(m, dict) for m in members):
        raise ProtocolError(f"diagnose reply has no list of member objects: {result!r}")
    return cast(Diagnose, dict(result))


def diagnose() -> Call[Diagnose]:
    return Call("diagnose", {}, _diagnose)


def invite(ttl_ms: int | None = None, uses: int | None = None) -> Call[Invite]:
    fields: JSONObject = {}
    if ttl_ms is not None:
        fields["ttl_ms"] = ttl_ms
    if uses is not None:
        fields["uses"] = uses
    return Call("invite", fields, Invite.from_json)


def leave(timeout_ms: int | None = None, timeout: float | None = None) -> Call[int]:
    fields: JSONObject = {} if timeout_ms is None else {"timeout_ms": timeout_ms}
    wait_for = ((LEAVE_TIMEOUT_MS if timeout_ms is None else timeout_ms) / 1000 + REPLY_GRACE) if timeout is None else timeout
    return Call("leave", fields, _int_field("handed_off", "leave reply"), wait_for)


# MARK: participants (README, "Participants": an extension of CONTROL.md)


def _participant_reply(obj: JSONObject) -> Participant:
    return Participant.from_json(Fields(obj, "participant.join reply").obj_field("participant"))


def _participants(obj: JSONObject) -> list[Participant]:
    return [Participant.from_json(p) for p in Fields(obj, "participants reply").objects("participants")]


def participant_id(participant: ParticipantRef) -> str:
    """The program id of a participant reference."""
    return participant.id if isinstance(participant, Participant) else participant


def participant_join(activity: str, program: ParticipantRef | None = None) -> Call[Participant]:
    fields: JSONObject = {"activity": activity}
    if program is not None:
        fields["program"] = participant_id(program)
    return Call("participant.join", fields, _participant_reply)


def participant_leave(program: ParticipantRef) -> Call[None]:
    return Call("participant.leave", {"program": participant_id(program)}, _none)


def participants(activity: str | None = None) -> Call[list[Participant]]:
    return Call("participants", {} if activity is None else {"activity": activity}, _participants)


# MARK: the event subscription


def topic_list(topics: Iterable[str] | None) -> list[str] | None:
    """``topics`` as the list ``subscribe`` sends (``None``: the node's default, every topic)."""
    if topics is None:
        return None
    if isinstance(topics, str):
        raise TypeError(f"'topics' is a list of topic names, such as [{topics!r}], not one string")
    return list(topics)


@dataclass
class Subscription:
    """The state of one event stream across its connections: what to subscribe to, the last
    cursor delivered, and what to do with each line.

    The node drops a subscriber that falls behind, sending ``{"event":"overflow","resume":C}``
    last; with ``resume`` set, the stream then subscribes again on a new connection with
    ``since = C`` (or the last cursor it delivered, if later), and drops any event at or below the
    last cursor it delivered, so that no event is delivered twice and none the node still retains
    is skipped.
    """

    topics: list[str] | None
    since: int | None
    resume: bool = True
    cursor: int | None = None
    """The cursor of the last event delivered (or ``since``, or the node's latest cursor at
    subscription): subscribing again with ``since=cursor`` continues where this stream is."""
    latest: int | None = None
    """The node's latest cursor when this stream (re)subscribed."""
    overflows: list[OverflowEvent] = field(default_factory=list)
    """Every ``overflow`` the node sent this stream (the last 100)."""
    ended: bool = False

    def __post_init__(self) -> None:
        if self.topics is not None:
            if isinstance(self.topics, str):
                raise TypeError("'topics' is a list of topic names, not one string")
            self.topics = list(self.topics)
        if self.since is not None and (not isinstance(self.since, int) or isinstance(self.since, bool) or self.since < 0):
            raise ValueError(f"'since' is a cursor (a non-negative integer), not {self.since!r}")
        self.cursor = self.since

    def request(self) -> Call[int]:
        """The ``subscribe`` request for the next connection."""
        fields: JSONObject = {}
        if self.topics is not None:
            fields["topics"] = self.topics
        since = self.cursor if self.cursor is not None else self.since
        if since is not None:
            fields["since"] = since
        return Call("subscribe", fields, _int_field("cursor", "subscribe reply"))

    def subscribed(self, latest: int) -> None:
        """The node accepted the subscription; ``latest`` is its latest cursor now."""
        self.latest = latest
        if self.cursor is None or self.cursor > latest:
            # No since: events after `latest` come. A since beyond the node's latest (a node that
            # lost its event log) means, as for the node, only new events: nothing is dropped.
            self.cursor = latest

    def event(self, obj: JSONObject) -> AnyEvent | None:
        """What a line on the subscribed connection means: an event to deliver, ``None`` for one
        to drop (delivered before), or the ``overflow`` (then :attr:`ended` is set unless the
        stream resumes: the caller resubscribes with :meth:`request`).

        Raises:
            ProtocolError: for a line that is not an event.
        """
        if "event" not in obj or "ok" in obj:
            raise ProtocolError(f"the node wrote a reply on an event stream: {str(obj)[:200]}")
        event = decode_event(obj)
        if isinstance(event, OverflowEvent):
            self.overflows.append(event)
            del self.overflows[:-100]
            if not self.resume:
                self.ended = True
            elif self.cursor is None or event.resume > self.cursor:
                self.cursor = event.resume
            return event
        if self.cursor is not None and event.cursor <= self.cursor:
            return None
        self.cursor = event.cursor
        return event
