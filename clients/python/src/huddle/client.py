"""The synchronous client: :class:`Client` for requests, :class:`EventStream` for events.

Requests go over one connection, one at a time (a lock makes a client usable from several
threads; the node answers the requests of one connection in order anyway, so open more clients
for requests that should run at once). Each event stream has its own connection, as the protocol
requires (``subscribe`` turns a connection into an event stream).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, TypeVar

from . import protocol
from .errors import ConnectionClosed, NodeNotRunning, ProtocolError
from .framing import (
    DEFAULT_MAX_LINE,
    READ_SIZE,
    LineBuffer,
    ReplyMatcher,
    check_control_path,
    decode_line,
    encode_request,
    is_event,
    peer_closed,
    resolve_control_path,
)
from .models import (
    Activity,
    AnyEvent,
    Attachment,
    Diagnose,
    Fetched,
    Invite,
    Participant,
    JSONObject,
    Member,
    OverflowEvent,
    Sent,
    Stats,
    Status,
)
from .protocol import AttachmentRef, Body, Call, MemberRef, ParticipantRef, Subscription

T = TypeVar("T")

DEFAULT_CONNECT_TIMEOUT = 5.0
"""Seconds connecting to the control socket may take."""


def _remaining(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("timed out")
    return left


class _Connection:
    """One control connection: whole lines in and out, with deadlines."""

    def __init__(self, path: str, connect_timeout: float, max_line: int) -> None:
        self.path = path
        check_control_path(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(connect_timeout)
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as error:
            sock.close()
            raise NodeNotRunning(path, error.strerror or str(error)) from None
        except socket.timeout:
            sock.close()
            raise TimeoutError(f"connecting to the Huddle node at {path} took more than {connect_timeout} s") from None
        except OSError as error:
            sock.close()
            if "too long" in str(error):
                raise ValueError(f"control socket path is too long for a Unix socket: {path}") from None
            raise ConnectionError(f"cannot connect to the Huddle node at {path}: {error}") from None
        self.sock = sock
        self.lines = LineBuffer(max_line)
        self.matcher = ReplyMatcher()
        self.broken = False

    def send(self, data: bytes, deadline: float | None) -> None:
        """Writes ``data`` whole; a connection cut mid-line is marked broken."""
        self.sock.settimeout(_remaining(deadline))
        try:
            self.sock.sendall(data)
        except socket.timeout:
            self.broken = True  # part of the line may be out: the connection is unusable
            raise
        except OSError as error:
            self.broken = True
            raise ConnectionClosed(self.path, f"({error.strerror or error})") from None

    def read_object(self, deadline: float | None) -> JSONObject:
        """The next line's JSON object.

        Raises:
            socket.timeout: nothing whole came before ``deadline`` (what came is kept).
            ConnectionClosed: the node closed the connection.
            ProtocolError: the line is not a JSON object, or too long.
        """
        while True:
            line = self.lines.next_line()
            if line is not None:
                return decode_line(line)
            self.sock.settimeout(_remaining(deadline))
            try:
                data = self.sock.recv(READ_SIZE)
            except socket.timeout:
                raise
            except OSError as error:
                self.broken = True
                raise ConnectionClosed(self.path, f"({error.strerror or error})") from None
            if not data:
                self.broken = True
                raise ConnectionClosed(self.path)
            try:
                self.lines.feed(data)
            except ProtocolError:
                self.broken = True
                raise

    def request(self, call: Call[T], deadline: float) -> T:
        """Sends ``call`` and returns its decoded reply; a reply that does not come before
        ``deadline`` is abandoned (dropped when it comes)."""
        token = self.matcher.next_token()
        line, expected_id = encode_request(call.op, token, call.fields)
        self.send(line, deadline)
        self.matcher.sent(token, expected_id)
        try:
            while True:
                obj = self.read_object(deadline)
                if is_event(obj):
                    continue  # not on a request connection; nothing to answer
                try:
                    matched = self.matcher.match(obj)
                except ProtocolError:
                    self.broken = True
                    raise
                if matched == token:
                    return call.result(obj)
        except socket.timeout:
            self.matcher.abandon(token)
            raise

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class Client:
    """A synchronous client of one Huddle node's control socket (CONTROL.md).

    ``path`` defaults as for the node and the ``huddle`` CLI: ``$HUDDLE_CONTROL``, else
    ``$XDG_RUNTIME_DIR/huddle.sock``, else ``/tmp/huddle-$UID.sock``. The client connects on
    ``with`` (or :meth:`connect`, or its first request) and reconnects by itself after the node
    closed the connection.

    Every method waits at most ``timeout`` seconds for its reply (the client's ``timeout`` unless
    the method is given one; operations that wait on the node's side by design, ``attach_add``,
    ``attach_get`` and ``leave``, wait longer by default). A reply that does not come raises
    :class:`TimeoutError`; whether the node carried the request out is then unknown.

    Raises (any method):
        HuddleError: the node answered with an error (``.code``, ``.message``).
        NodeNotRunning: nothing answers at the control socket (a :class:`ConnectionError`).
        ConnectionClosed: the node closed the connection before answering.
        UntrustedSocket: the socket or its directory belongs to another user.
        TimeoutError: no reply in time.
        ProtocolError: the node wrote something CONTROL.md does not allow.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = protocol.DEFAULT_TIMEOUT,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.path = resolve_control_path(path)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_line = max_line
        self._connection: _Connection | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Client({self.path!r})"

    def __enter__(self) -> Client:
        self.connect()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def connect(self) -> Client:
        """Connects now (a request connects by itself otherwise), so that a node that is not
        there shows at once. Returns the client."""
        with self._lock:
            self._connected()
        return self

    def close(self) -> None:
        """Closes the request connection (event streams have their own: close them apart)."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _connected(self) -> _Connection:
        if self._connection is not None and (self._connection.broken or peer_closed(self._connection.sock)):
            self._connection.close()
            self._connection = None
        if self._connection is None:
            self._connection = _Connection(self.path, self.connect_timeout, self.max_line)
        return self._connection

    def call(self, call: Call[T], timeout: float | None = None) -> T:
        """Runs one request (see :mod:`huddle.protocol`) and returns its decoded result."""
        wait = timeout if timeout is not None else call.timeout if call.timeout is not None else self.timeout
        deadline = time.monotonic() + wait
        if not self._lock.acquire(timeout=wait):
            raise TimeoutError(f"{call.op}: this client's earlier request to {self.path} took all of {wait:g} s")
        try:
            connection = self._connected()
            try:
                return connection.request(call, deadline)
            except socket.timeout:
                raise TimeoutError(f"{call.op}: no reply from the Huddle node at {self.path} within {wait:g} s") from None
            except ProtocolError:
                connection.close()
                self._connection = None
                raise
        finally:
            self._lock.release()

    def request(self, op: str, fields: Mapping[str, Any] | None = None, *, timeout: float | None = None) -> JSONObject:
        """Any request, for what a node offers beyond CONTROL.md: the reply's result fields (the
        reply without ``id`` and ``ok``), or :class:`HuddleError`."""
        return self.call(protocol.raw(op, fields), timeout)

    # MARK: operations (CONTROL.md, Operations)

    def status(self, *, timeout: float | None = None) -> Status:
        """This node: its member and node ids, name, address, session, clocks, epoch…"""
        return self.call(protocol.status(), timeout)

    def members(self, *, timeout: float | None = None) -> list[Member]:
        """Every member this node knows, with its state and how it is reached."""
        return self.call(protocol.members(), timeout)

    def join(self, addr: str, *, timeout: float | None = None) -> int:
        """Joins the session through the member at ``addr`` (``host:port``); returns the count of
        members once joined (``unavailable`` when it cannot)."""
        return self.call(protocol.join(addr), timeout)

    def send(self, body: Body, *, to: Iterable[MemberRef] | None = None, reliable: bool = True,
             timeout: float | None = None) -> Sent:
        """Sends a message: a ``str`` as ``text``, bytes as ``data``; to the members in ``to`` only
        when given (else a broadcast); unreliable (one datagram, no retransmission) when
        ``reliable`` is false. ``too_large`` above the node's body limits; ``busy`` when its
        retransmit buffers stay full."""
        return self.call(protocol.send(body, to, reliable), timeout)

    def events(self, topics: Iterable[str] | None = None, since: int | None = None, *, resume: bool = True,
               timeout: float | None = None) -> EventStream:
        """Subscribes, on a connection of its own, and returns the stream of events.

        ``topics`` ⊆ ``members``, ``messages``, ``attachments``, ``activity`` (default: all).
        ``since``: a cursor; every retained event after it comes first, then live ones (without
        it, only events after the subscription). The subscription is made before this returns.

        When the node drops the stream for falling behind (``overflow``), the stream subscribes
        again from where it was, by itself, so that no event comes twice and none is skipped;
        with ``resume=False`` it yields the :class:`~huddle.models.OverflowEvent` and ends.

        ``timeout``: seconds iteration waits for the next event before raising
        :class:`TimeoutError` (default: as long as the node is up; a node that stops ends the
        wait with :class:`ConnectionClosed`). Use :meth:`EventStream.get` to poll.
        """
        subscription = Subscription(topics=protocol.topic_list(topics), since=since, resume=resume)
        return EventStream(self.path, subscription, reply_timeout=self.timeout, event_timeout=timeout,
                           connect_timeout=self.connect_timeout, max_line=self.max_line)

    def subscribe(self, topics: Iterable[str] | None = None, since: int | None = None, *, resume: bool = True,
                  timeout: float | None = None) -> EventStream:
        """:meth:`events` (the same, under the op's name, as in the asyncio client)."""
        return self.events(topics, since, resume=resume, timeout=timeout)

    def attach_add(self, path: str | os.PathLike[str], *, name: str | None = None, meta: Any = None,
                   timeout: float | None = None) -> Attachment:
        """Shares the file at ``path`` (made absolute here; the node reads it) as an attachment
        named ``name`` (default: the file's name) with ``meta`` (any JSON, ≤ 16 KiB). Returns once
        the file is chunked, stored and announced (default wait: 600 s)."""
        return self.call(protocol.attach_add(path, name, meta, timeout))

    def attach_list(self, *, timeout: float | None = None) -> list[Attachment]:
        """Every attachment this node knows."""
        return self.call(protocol.attach_list(), timeout)

    def attach_get(self, attachment: AttachmentRef, path: str | os.PathLike[str], *, wait: bool = True,
                   timeout_ms: int | None = None, timeout: float | None = None) -> Fetched:
        """Writes the attachment's whole file to ``path`` (made absolute here; a temporary file
        renamed into place). With ``wait`` (the default) the node fetches missing chunks for up to
        ``timeout_ms`` (default 600,000 here) and answers ``timeout`` after; without, it answers
        ``unavailable`` when the file is not complete there. The client waits ``timeout_ms`` plus
        30 s for the reply unless ``timeout`` says otherwise."""
        return self.call(protocol.attach_get(attachment, path, wait, timeout_ms, timeout))

    def attach_remove(self, attachment: AttachmentRef, *, timeout: float | None = None) -> None:
        """Removes an attachment from the session (``not_found`` for an unknown id)."""
        self.call(protocol.attach_remove(attachment), timeout)

    def activity_get(self, *, timeout: float | None = None) -> Activity:
        """The session's activity and who set it."""
        return self.call(protocol.activity_get(), timeout)

    def activity_set(self, value: Any, *, timeout: float | None = None) -> None:
        """Sets the session's activity (any JSON, ≤ 16 KiB serialized: ``too_large`` above)."""
        self.call(protocol.activity_set(value), timeout)

    def stats(self, *, timeout: float | None = None) -> Stats:
        """The node's traffic and delivery counters."""
        return self.call(protocol.stats(), timeout)

    def remove(self, member: MemberRef, *, timeout: float | None = None) -> int:
        """Removes a member (member string, node key in hex, or :class:`Member`) from the session
        for good and rotates the session key; returns the new epoch."""
        return self.call(protocol.remove(member), timeout)

    def rekey(self, *, timeout: float | None = None) -> int:
        """Rotates the session key, removing nobody; returns the new epoch."""
        return self.call(protocol.rekey(), timeout)

    def diagnose(self, *, timeout: float | None = None) -> Diagnose:
        """What ``huddle doctor`` asks: the node's own checks as facts (key file mode, each
        advertised address probed over TCP and UDP, members' state, last heard and epoch, store,
        subscribers); the README's "Operate" section lists the fields."""
        return self.call(protocol.diagnose(), timeout)

    def invite(self, *, ttl_ms: int | None = None, uses: int | None = None, timeout: float | None = None) -> Invite:
        """A one-time pairing code, valid ``ttl_ms`` (default 600,000) for ``uses`` pairings
        (default 1), for ``huddle run --invite CODE --join ADDR``."""
        return self.call(protocol.invite(ttl_ms, uses), timeout)

    def participant_join(self, activity: str, *, program: ParticipantRef | None = None,
                         timeout: float | None = None) -> Participant:
        """Makes the program on this client's connection a participant of ``activity`` (1–200
        UTF-8 bytes) until :meth:`participant_leave`, or until the connection closes
        (:meth:`close`); ``program``: a program id to take again (after a lost connection). Returns
        the participant (``too_large`` when the node holds 64 already)."""
        return self.call(protocol.participant_join(activity, program), timeout)

    def participant_leave(self, program: ParticipantRef, *, timeout: float | None = None) -> None:
        """The participant ``program`` of this node (its id or the :class:`Participant`) is one no
        more (``not_found`` when there is no such participant here)."""
        self.call(protocol.participant_leave(program), timeout)

    def participants(self, *, activity: str | None = None, timeout: float | None = None) -> list[Participant]:
        """The participants this node shows (its own and those its linked members announced), of
        every activity or of ``activity``."""
        return self.call(protocol.participants(activity), timeout)

    def leave(self, *, timeout_ms: int | None = None, timeout: float | None = None) -> int:
        """Hands off chunks (for at most ``timeout_ms``, default 30,000), then the node leaves the
        session, removes its data and exits. Returns the chunks handed off."""
        return self.call(protocol.leave(timeout_ms, timeout))


class EventStream(Iterator[AnyEvent]):
    """A subscription's events, in cursor order, on a connection of its own (made by
    :meth:`Client.events`). Iterate it, or poll it with :meth:`get`; close it when done (``with``
    does). One consumer at a time.

    The stream reads from the node only as events are taken: a consumer that lags leaves the
    backlog with the node, which drops the stream with ``overflow`` past its bounds; the stream
    then subscribes again by itself from its last cursor (``resume=True``). :attr:`cursor` is
    where a later ``client.events(since=stream.cursor)`` continues.
    """

    def __init__(self, path: str, subscription: Subscription, *, reply_timeout: float, event_timeout: float | None,
                 connect_timeout: float, max_line: int) -> None:
        self.path = path
        self._subscription = subscription
        self._reply_timeout = reply_timeout
        self._event_timeout = event_timeout
        self._connect_timeout = connect_timeout
        self._max_line = max_line
        self._connection: _Connection | None = None
        self._closed = False
        self._subscribe()

    def __repr__(self) -> str:
        return f"EventStream({self.path!r}, topics={self._subscription.topics}, cursor={self.cursor})"

    @property
    def cursor(self) -> int | None:
        """The cursor of the last event delivered (before any: ``since``, or the node's latest
        cursor when it subscribed)."""
        return self._subscription.cursor

    @property
    def latest(self) -> int | None:
        """The node's latest cursor when the stream last subscribed."""
        return self._subscription.latest

    @property
    def overflows(self) -> list[OverflowEvent]:
        """The ``overflow`` events the node sent this stream (each was followed by a resume)."""
        return list(self._subscription.overflows)

    @property
    def ended(self) -> bool:
        """Whether the stream is over: closed, or overflowed with ``resume=False``."""
        return self._closed or self._subscription.ended

    def _subscribe(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        connection = _Connection(self.path, self._connect_timeout, self._max_line)
        call = self._subscription.request()
        try:
            latest = connection.request(call, time.monotonic() + self._reply_timeout)
        except socket.timeout:
            connection.close()
            raise TimeoutError(f"subscribe: no reply from the Huddle node at {self.path} within {self._reply_timeout:g} s") from None
        except BaseException:
            connection.close()
            raise
        self._subscription.subscribed(latest)
        self._connection = connection

    def get(self, timeout: float | None = None) -> AnyEvent | None:
        """The next event, or ``None`` when none came within ``timeout`` seconds (``None``: wait
        as long as the node is up) or the stream has ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.ended:
            if self._connection is None:
                self._subscribe()
            assert self._connection is not None
            try:
                obj = self._connection.read_object(deadline)
            except socket.timeout:
                return None
            except (ConnectionClosed, ProtocolError):
                self.close()
                raise
            event = self._subscription.event(obj)
            if isinstance(event, OverflowEvent):
                self._connection.close()  # the node dropped this subscriber
                self._connection = None
                if self._subscription.ended:
                    return event
                continue
            if event is not None:
                return event
        return None

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> AnyEvent:
        if self.ended:
            raise StopIteration
        event = self.get(self._event_timeout)
        if event is None:
            if self.ended:
                raise StopIteration
            raise TimeoutError(f"no event from the Huddle node at {self.path} within {self._event_timeout:g} s")
        return event

    def close(self) -> None:
        """Ends the subscription (closes its connection)."""
        self._closed = True
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
