"""Typed replies and events of the Huddle control protocol (CONTROL.md), and their decoding.

Every class keeps the JSON object it was decoded from in ``raw``, so fields a later node adds are
never lost. Attribute names are CONTROL.md's field names, except where the name is a Python
keyword or ``self``: those get a trailing underscore (``from_``, ``self_``).

A field CONTROL.md lists but that a node does not send (an older node) is ``None``; a field the
client cannot do without (a reply's ``member``, an event's ``cursor``) raises
:class:`~huddle.errors.ProtocolError` when it is missing or has the wrong JSON type.

This module does no I/O: the synchronous and the asyncio clients share it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypedDict, Union

from .errors import ProtocolError

JSONObject = dict[str, Any]
"""A decoded JSON object."""

MEMBER_STATES = frozenset({"alive", "suspect", "failed", "left", "removed"})
"""``state`` of a member (CONTROL.md, ``members``)."""
PATHS = frozenset({"direct", "relayed", "none", "self"})
"""``path`` of a member: how this node reaches it now."""
NAT_KINDS = frozenset({"none", "easy", "hard", "unknown"})
"""``nat`` of ``status``."""
ATTACHMENT_STATES = frozenset({"announced", "replicated", "unavailable", "removed"})
"""``state`` of an attachment."""
MEMBER_CHANGES = frozenset({"joined", "suspect", "alive", "failed", "left", "updated", "removed", "path"})
"""``change`` of a ``member`` event."""
ATTACHMENT_CHANGES = frozenset({"added", "progress", "complete", "replicated", "unavailable", "removed"})
"""``change`` of an ``attachment`` event."""
TOPICS = ("members", "messages", "attachments", "activity")
"""The topics of ``subscribe`` (its default is all of them)."""


class Fields:
    """Typed reads of one JSON object; an error names the object and the field.

    The ``opt_*`` reads return ``None`` for a field that is absent or ``null``.
    """

    def __init__(self, obj: Mapping[str, Any], what: str) -> None:
        self.obj = obj
        self.what = what

    def _fail(self, key: str, expected: str) -> ProtocolError:
        if key not in self.obj:
            return ProtocolError(f"{self.what} has no {key!r} field (expected {expected})")
        return ProtocolError(f"{self.what} field {key!r} is {self.obj[key]!r}, not {expected}")

    def present(self, key: str) -> Any:
        """The value of a field that must be there (any JSON, ``null`` included)."""
        if key not in self.obj:
            raise self._fail(key, "a JSON value")
        return self.obj[key]

    def string(self, key: str) -> str:
        value = self.obj.get(key)
        if not isinstance(value, str):
            raise self._fail(key, "a string")
        return value

    def opt_string(self, key: str) -> str | None:
        value = self.obj.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._fail(key, "a string or null")
        return value

    def integer(self, key: str) -> int:
        value = self.obj.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._fail(key, "an integer")
        return value

    def opt_integer(self, key: str) -> int | None:
        value = self.obj.get(key)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._fail(key, "an integer or null")
        return value

    def number(self, key: str) -> float:
        value = self.obj.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise self._fail(key, "a number")
        return float(value)

    def opt_number(self, key: str) -> float | None:
        value = self.obj.get(key)
        if value is None:
            return None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise self._fail(key, "a number or null")
        return float(value)

    def boolean(self, key: str) -> bool:
        value = self.obj.get(key)
        if not isinstance(value, bool):
            raise self._fail(key, "true or false")
        return value

    def opt_boolean(self, key: str) -> bool | None:
        value = self.obj.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self._fail(key, "true, false or null")
        return value

    def obj_field(self, key: str) -> JSONObject:
        value = self.obj.get(key)
        if not isinstance(value, dict):
            raise self._fail(key, "an object")
        return value

    def string_list(self, key: str) -> list[str]:
        value = self.obj.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._fail(key, "a list of strings")
        return list(value)

    def opt_string_list(self, key: str) -> list[str] | None:
        if self.obj.get(key) is None:
            return None
        return self.string_list(key)

    def int_map(self, key: str) -> dict[str, int]:
        value = self.obj.get(key)
        if not isinstance(value, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value.values()
        ):
            raise self._fail(key, "an object of integers")
        return dict(value)

    def objects(self, key: str) -> list[JSONObject]:
        value = self.obj.get(key)
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self._fail(key, "a list of objects")
        return list(value)


def _raw() -> Any:
    return field(repr=False, compare=False)


# MARK: replies


@dataclass(frozen=True, kw_only=True)
class Member:
    """One member, as ``members`` lists it and ``member`` events carry it.

    ``state`` is one of ``alive``, ``suspect``, ``failed``, ``left``, ``removed``; ``path`` one of
    ``direct``, ``relayed``, ``none``, ``self``; ``via`` the relaying member when ``relayed``;
    ``rtt_ms`` the smoothed round-trip time over that path. ``self_`` is CONTROL.md's ``self``:
    true for the node answering.
    """

    member: str
    node: str
    name: str
    addr: str
    state: str
    incarnation: int
    self_: bool
    path: str | None = None
    via: str | None = None
    rtt_ms: float | None = None
    raw: JSONObject = _raw()

    @classmethod
    def from_json(cls, obj: JSONObject) -> Member:
        f = Fields(obj, "member")
        return cls(
            member=f.string("member"),
            node=f.string("node"),
            name=f.string("name"),
            addr=f.string("addr"),
            state=f.string("state"),
            incarnation=f.integer("incarnation"),
            self_=f.boolean("self"),
            path=f.opt_string("path"),
            via=f.opt_string("via"),
            rtt_ms=f.opt_number("rtt_ms"),
            raw=obj,
        )


@dataclass(frozen=True, kw_only=True)
class Status:
    """The reply of ``status``.

    ``members`` is the count of alive members, this one included; ``clock`` maps each member to
    the highest broadcast seq delivered here, ``baseline`` is the clock this member took from its
    sponsor when it joined; ``epoch`` is the session key epoch in use (0 before any rotation);
    ``admins`` the node keys of the session's admins in that epoch (empty: every member may remove
    and rekey).
    """

    member: str
    node: str
    name: str
    addr: str
    session: str
    members: int
    clock: dict[str, int]
    baseline: dict[str, int]
    uptime_ms: int
    epoch: int | None = None
    reflexive: list[str] | None = None
    nat: str | None = None
    resumed: bool | None = None
    admins: list[str] | None = None
    raw: JSONObject = _raw()

    @classmethod
    def from_json(cls, obj: JSONObject) -> Status:
        f = Fields(obj, "status reply")
        return cls(
            member=f.string("member"),
            node=f.string("node"),
            name=f.string("name"),
            addr=f.string("addr"),
            session=f.string("session"),
            members=f.integer("members"),
            clock=f.int_map("clock"),
            baseline=f.int_map("baseline"),
            uptime_ms=f.integer("uptime_ms"),
            epoch=f.opt_integer("epoch"),
            reflexive=f.opt_string_list("reflexive"),
            nat=f.opt_string("nat"),
            resumed=f.opt_boolean("resumed"),
            admins=f.opt_string_list("admins"),
            raw=obj,
        )


@dataclass(frozen=True, kw_only=True)
class Sent:
    """The reply of ``send``: the message id, and its broadcast seq (``None`` for a directed or an
    unreliable message)."""

    msg: str
    seq: int | None
    raw: JSONObject = _raw()

    @classmethod
    def from_json(cls, obj: JSONObject) -> Sent:
        f = Fields(obj, "send reply")
        return cls(msg=f.string("msg"), seq=f.opt_integer("seq"), raw=obj)


@dataclass(frozen=True, kw_only=True)
class Attachment:
    """An attachment object (CONTROL.md).

    ``from_`` is CONTROL.md's ``from``: the uploading member. ``have`` counts the chunks held here,
    ``holders`` the members holding every chunk. ``state`` is one of ``announced``, ``replicated``,
    ``unavailable``, ``removed``.
    """

    id: str
    name: str
    size: int
    meta: Any
    from_: str
    chunk_size: int
    chunks: int
    have: int
    complete: bool
    holders: list[str]
    state: str
    raw: JSONObject = _raw()

    @classmethod
    def from_json(cls, obj: JSONObject) -> Attachment:
        f = Fields(obj, "attachment")
        return cls(
            id=f.string("id"),
            name=f.string("name"),
            size=f.integer("size"),
            meta=obj.get("meta"),
            from_=f.string("from"),
            chunk_size=f.integer("chunk_size"),
            chunks=f.integer("chunks"),
            have=f.integer("have"),
            complete=f.boolean("complete"),
            holders=f.string_list("holders"),
            state=f.string("state"),
            raw=obj,
        )


@dataclass(frozen=True, kw_only=True)
class Fetched:
    """The reply of ``attach.get``: the attachment, and the path its whole file was written to."""

    attachment: Attachment
    path: str
    raw: JSONObject = _raw()

    @classmethod
    def from_json(cls, obj: JSONObject) -> Fetched:
        f = Fields(obj, "attach.get reply")
        return cls(attachment=Attachment.from_json(f.obj_field("attachment")), path=f.string("path"), raw=obj)


@dataclass(frozen=True, kw_only=True)
class Activity:
    """The session's activity (``activity.get``, ``activity`` events): any JSON or ``None``, and the
    member that set it (``None`` when nobody has)."""

    activity: Any
    set_by: str | None
    raw: JSONObject = _raw()

    @classmethod
    def from_json(cls, obj: JSONObject) -> Activity:
        f = Fields(obj, "activity")
        f.present("activity")
        return cls(activity=obj["activity"], set_by=f.opt_string("set_by"), raw=obj)


@dataclass(frozen=True, kw_only=True)
class ByteCounts:
    """Bytes by kind of traffic (``stats``: ``bytes_sent``, ``bytes_received``)."""

    total: int
    gossip: int
    messages: int
    chunks: int
    raw: JSONObject = _raw()

    @classmethod
    def from_json(cls, obj: JSONObject, what: str) -> ByteCounts:
        f = Fields(obj, what)
        return cls(
            total=f.integer("total"),
            gossip=f.integer("gossip"),
            messages=f.integer("messages"),
            chunks=f.integer("chunks"),
            raw=obj,
        )


@dataclass(frozen=True, kw_only=True)
class Stats:
    """The reply of ``stats`` (the node's counters since it started). Counters a node adds beyond
    CONTROL.md are in ``raw``."""

    bytes_sent: ByteCounts
    bytes_received: ByteCounts
    chunks_served: int
    chunks_fetched: int
    messages_sent: int
    messages_delivered: int
    retransmits: int
    links: int
    raw: JSONObject = _raw()

    @classmethod
    def from_json(cls, obj: JSONObject) -> Stats:
        f = Fields(obj, "stats reply")
        return cls(
            bytes_sent=ByteCounts.from_json(f.obj_field("bytes_sent"), "stats bytes_sent"),
            bytes_received=ByteCounts.from_json(f.obj_field("bytes_received"), "stats bytes_received"),
            chunks_served=f.integer("chunks_served"),
            chunks_fetched=f.integer("chunks_fetched"),
            messages_sent=f.integer("messages_sent"),
            messages_delivered=f.integer("messages_delivered"),
            retransmits=f.integer("retransmits"),
            links=f.integer("links"),
            raw=obj,
        )


class ProbeOutcome(TypedDict):
    """One address probe of ``diagnose``: ``ms`` is the TCP connect time (``None`` for UDP)."""

    ok: bool
    ms: int | None
    error: str | None


class _DiagnoseMemberFields(TypedDict):
    member: str
    name: str
    addr: str
    self: bool
    state: str
    linked: bool
    last_heard_ms: int | None
    epoch: int | str | None
    rtt_ms: float | None
    clock_skew_ms: float | None
    clock_skew_error_ms: float | None


class DiagnoseMember(_DiagnoseMemberFields, total=False):
    """One member in a ``diagnose`` reply (README, "Operate"). ``rtt_ms`` is the smoothed round-trip
    time over its link, ``clock_skew_ms`` how far its wall clock is ahead of the node's (negative:
    behind), within ``clock_skew_error_ms``; ``None`` for the node itself and a member never
    measured. ``tcp`` and ``udp`` are there for the members probed (at most 64)."""

    tcp: ProbeOutcome
    udp: ProbeOutcome


class DiagnoseKeyFile(TypedDict, total=False):
    """The node's key file: ``mode`` as octal digits (``"600"``), or ``error`` when it cannot be read."""

    path: str
    mode: str | None
    error: str


class DiagnoseStore(TypedDict):
    used: int
    limit: int


class DiagnoseSubscriber(TypedDict):
    events_behind: int
    overflow_risk: float


class DiagnoseJoining(TypedDict):
    """A ``--join`` address that has not answered yet: for how many ``seconds`` it has been tried
    and its last failure (``error``, at most 200 characters)."""

    addr: str
    seconds: int
    error: str


class Diagnose(TypedDict):
    """The reply of ``diagnose`` (an extension of CONTROL.md; README, "Operate"): the facts
    ``huddle doctor`` turns into findings. A plain ``dict`` at run time; ``clock_skew_ms`` is the
    members' skew of largest magnitude (``None`` when none is measured); ``joining`` lists the join
    addresses that have not answered yet (empty once a join went through)."""

    key_file: DiagnoseKeyFile
    listen: str
    addr: str
    epoch: int
    members: list[DiagnoseMember]
    store: DiagnoseStore
    subscribers: list[DiagnoseSubscriber]
    clock_skew_ms: float | None
    joining: list[DiagnoseJoining]


@dataclass(frozen=True, kw_only=True)
class Invite:
    """The reply of ``invite``: a one-time pairing ``code`` (for ``huddle run --invite CODE --join
    ADDR``), the ``addr`` to join, and ``expires_ms``."""

    code: str
    addr: str
    expires_ms: int
    raw: JSONObject = _raw()

    @classmethod
    def from_json(cls, obj: JSONObject) -> Invite:
        f = Fields(obj, "invite reply")
        return cls(code=f.string("code"), addr=f.string("addr"), expires_ms=f.integer("expires_ms"), raw=obj)


@dataclass(frozen=True, kw_only=True)
class Participant:
    """A program taking part in an activity (README, "Participants", an extension of CONTROL.md):
    ``id`` the program id (16 hex digits), ``member``, ``node`` and ``name`` its node's,
    ``activity`` the activity it joined, ``self_`` true when it is on the node answering."""

    id: str
    member: str
    node: str
    name: str
    activity: str
    self_: bool
    raw: JSONObject = _raw()

    @classmethod
    def from_json(cls, obj: JSONObject) -> Participant:
        f = Fields(obj, "participant")
        return cls(id=f.string("id"), member=f.string("member"), node=f.string("node"), name=f.string("name"),
                   activity=f.string("activity"), self_=f.boolean("self"), raw=obj)


# MARK: events


@dataclass(frozen=True, kw_only=True)
class Event:
    """What every event has: ``cursor``, the node's per-event counter (one more per event), and
    the whole line in ``raw``. ``EVENT`` is the event name a class decodes."""

    EVENT: ClassVar[str] = ""
    cursor: int
    raw: JSONObject = _raw()


@dataclass(frozen=True, kw_only=True)
class MemberEvent(Event):
    """``member``: ``change`` is one of ``joined``, ``suspect``, ``alive``, ``failed``, ``left``,
    ``updated``, ``removed``, ``path``; ``by`` is the member that removed it (with ``removed``)."""

    EVENT: ClassVar[str] = "member"
    change: str
    member: Member
    by: str | None = None


@dataclass(frozen=True, kw_only=True)
class MessageEvent(Event):
    """``message``: a delivered message.

    ``data`` is the body, decoded from the line's base64; ``text`` is the body as a string when it
    is valid UTF-8 (else ``None``). ``from_`` is CONTROL.md's ``from``; ``seq`` is the broadcast
    seq (``None`` for directed and unreliable messages); ``deps`` maps member → seq this message
    depends on; ``to`` lists the recipients of a directed message (``None`` for a broadcast).
    """

    EVENT: ClassVar[str] = "message"
    msg: str
    from_: str
    seq: int | None
    deps: dict[str, int]
    to: list[str] | None
    reliable: bool
    data: bytes
    text: str | None = None


@dataclass(frozen=True, kw_only=True)
class AttachmentEvent(Event):
    """``attachment``: ``change`` is one of ``added``, ``progress``, ``complete``, ``replicated``,
    ``unavailable``, ``removed``."""

    EVENT: ClassVar[str] = "attachment"
    change: str
    attachment: Attachment


@dataclass(frozen=True, kw_only=True)
class ActivityEvent(Event):
    """``activity``: the session's activity changed to ``activity``, set by ``set_by``."""

    EVENT: ClassVar[str] = "activity"
    activity: Any
    set_by: str | None


@dataclass(frozen=True, kw_only=True)
class GapEvent(Event):
    """``gap``: reliable messages ``from_seq``..``to_seq`` of ``member`` that this node will never
    deliver (after a restart whose missed messages nobody retains any more)."""

    EVENT: ClassVar[str] = "gap"
    member: str
    from_seq: int
    to_seq: int


@dataclass(frozen=True, kw_only=True)
class OverflowEvent(Event):
    """``overflow``: this subscriber fell behind and was dropped; ``resume`` is the cursor to
    resubscribe from (``since``). The client's event streams do that by themselves unless asked
    not to (``resume=False``), in which case this event ends the stream."""

    EVENT: ClassVar[str] = "overflow"
    resume: int


@dataclass(frozen=True, kw_only=True)
class UnknownEvent(Event):
    """An event CONTROL.md does not list (a node's extension): its name, and the line in ``raw``."""

    event: str


AnyEvent = Union[MemberEvent, MessageEvent, AttachmentEvent, ActivityEvent, GapEvent, OverflowEvent, UnknownEvent]
"""Every event type an event stream yields."""


def decode_data(text: str, what: str) -> bytes:
    """The bytes of a base64 field."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise ProtocolError(f"{what} is not valid base64: {error}") from None


def decode_event(obj: JSONObject) -> AnyEvent:
    """The typed event of an event line (an object with an ``event`` key)."""
    f = Fields(obj, "event")
    name = f.string("event")
    cursor = f.integer("cursor")
    f = Fields(obj, f"{name} event")
    if name == "member":
        return MemberEvent(
            cursor=cursor,
            change=f.string("change"),
            member=Member.from_json(f.obj_field("member")),
            by=f.opt_string("by"),
            raw=obj,
        )
    if name == "message":
        return MessageEvent(
            cursor=cursor,
            msg=f.string("msg"),
            from_=f.string("from"),
            seq=f.opt_integer("seq"),
            deps=f.int_map("deps"),
            to=f.opt_string_list("to"),
            reliable=f.boolean("reliable"),
            data=decode_data(f.string("data"), "message event field 'data'"),
            text=f.opt_string("text"),
            raw=obj,
        )
    if name == "attachment":
        return AttachmentEvent(
            cursor=cursor,
            change=f.string("change"),
            attachment=Attachment.from_json(f.obj_field("attachment")),
            raw=obj,
        )
    if name == "activity":
        f.present("activity")
        return ActivityEvent(cursor=cursor, activity=obj["activity"], set_by=f.opt_string("set_by"), raw=obj)
    if name == "gap":
        return GapEvent(
            cursor=cursor,
            member=f.string("member"),
            from_seq=f.integer("from_seq"),
            to_seq=f.integer("to_seq"),
            raw=obj,
        )
    if name == "overflow":
        return OverflowEvent(cursor=cursor, resume=f.integer("resume"), raw=obj)
    return UnknownEvent(cursor=cursor, event=name, raw=obj)
