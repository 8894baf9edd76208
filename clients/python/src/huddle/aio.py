"""The asyncio client: :class:`AsyncClient` and :class:`AsyncEventStream`, with the same methods
as the synchronous ones (awaited), built on the same requests, decoding and subscription logic
(:mod:`huddle.protocol`, :mod:`huddle.framing`, :mod:`huddle.models`).

::

    async with AsyncClient("/run/huddle.sock") as c:
        print(await c.status())
        async with c.events(topics=["messages"]) as stream:
            async for event in stream:
                ...
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping
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


class _Timeout(Exception):
    """A wait ran out (turned into a :class:`TimeoutError` with the op and path)."""


class _Raised(Exception):
    """Carries a :class:`TimeoutError` raised inside :func:`_within` out of ``wait_for``, which
    must not be taken for ``wait_for``'s own (the same class from Python 3.11 on)."""

    def __init__(self, error: TimeoutError) -> None:
        super().__init__()
        self.error = error


async def _within(awaitable: Awaitable[T], timeout: float | None) -> T:
    """``awaitable``'s result, or :class:`_Timeout` after ``timeout`` seconds (``None``: no bound)."""
    if timeout is None:
        return await awaitable

    async def guarded() -> T:
        try:
            return await awaitable
        except TimeoutError as error:
            raise _Raised(error) from None

    try:
        return await asyncio.wait_for(guarded(), max(timeout, 0.0))
    except _Raised as raised:
        raise raised.error from None
    except asyncio.TimeoutError:
        raise _Timeout() from None


class _AsyncConnection:
    """One control connection on the running event loop: whole lines in and out."""

    def __init__(self, path: str, sock: socket.socket, max_line: int) -> None:
        self.path = path
        self.sock = sock
        self.lines = LineBuffer(max_line)
        self.matcher = ReplyMatcher()
        self.broken = False

    @classmethod
    async def open(cls, path: str, connect_timeout: float, max_line: int) -> _AsyncConnection:
        check_control_path(path)
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await _within(loop.sock_connect(sock, path), connect_timeout)
        except (FileNotFoundError, ConnectionRefusedError) as error:
            sock.close()
            raise NodeNotRunning(path, error.strerror or str(error)) from None
        except _Timeout:
            sock.close()
            raise TimeoutError(f"connecting to the Huddle node at {path} took more than {connect_timeout} s") from None
        except OSError as error:
            sock.close()
            if "too long" in str(error):
                raise ValueError(f"control socket path is too long for a Unix socket: {path}") from None
            raise ConnectionError(f"cannot connect to the Huddle node at {path}: {error}") from None
        except BaseException:
            sock.close()
            raise
        return cls(path, sock, max_line)

    async def send(self, data: bytes) -> None:
        """Writes ``data`` whole; a write that fails or is cancelled half-way breaks the
        connection (part of a line may be out)."""
        try:
            await asyncio.get_running_loop().sock_sendall(self.sock, data)
        except OSError as error:
            self.broken = True
            raise ConnectionClosed(self.path, f"({error.strerror or error})") from None
        except BaseException:
            self.broken = True
            raise

    async def _readable(self) -> None:
        """Waits until the socket has something to read. Only readiness is awaited, never a read:
        a wait cancelled (a timeout) can lose no bytes, as a cancelled ``sock_recv`` could."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        fd = self.sock.fileno()
        loop.add_reader(fd, wake)
        try:
            await ready
        finally:
            loop.remove_reader(fd)

    async def read_object(self) -> JSONObject:
        """The next line's JSON object (cancelling it loses nothing: what came is kept)."""
        while True:
            line = self.lines.next_line()
            if line is not None:
                return decode_line(line)
            try:
                data = self.sock.recv(READ_SIZE)
            except BlockingIOError:
                await self._readable()
                continue
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
            await asyncio.sleep(0)  # a stream that is always readable still lets other tasks run

    async def request(self, call: Call[T]) -> T:
        """Sends ``call`` and returns its decoded reply. Cancelled (a timeout) after the request
        went out, the request is abandoned: its reply is dropped when it comes, and the connection
        serves the next requests; cancelled while writing, the connection is broken."""
        token = self.matcher.next_token()
        line, expected_id = encode_request(call.op, token, call.fields)
        await self.send(line)
        self.matcher.sent(token, expected_id)
        try:
            while True:
                obj = await self.read_object()
                if is_event(obj):
                    continue  # not on a request connection; nothing to answer
                try:
                    matched = self.matcher.match(obj)
                except ProtocolError:
                    self.broken = True
                    raise
                if matched == token:
                    return call.result(obj)
        except asyncio.CancelledError:
            self.matcher.abandon(token)
            raise

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class AsyncClient:
    """An asyncio client of one Huddle node's control socket (CONTROL.md): the methods of
    :class:`huddle.Client`, awaited. Requests of one client go one at a time (the node answers a
    connection's requests in order); use several clients for requests that should run at once.

    ``path`` defaults as for the node and the CLI (``$HUDDLE_CONTROL``, else
    ``$XDG_RUNTIME_DIR/huddle.sock``, else ``/tmp/huddle-$UID.sock``). Errors and timeouts are
    those of :class:`huddle.Client`.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = protocol.DEFAULT_TIMEOUT,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.path = resolve_control_path(path)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_line = max_line
        self._connection: _AsyncConnection | None = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"AsyncClient({self.path!r})"

    async def __aenter__(self) -> AsyncClient:
        """Sends a message: ``str`` as text, bytes as data (:meth:`huddle.Client.send`)."""
        await self.connect()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.close()

    async def connect(self) -> AsyncClient:
        """Connects now (a request connects by itself otherwise). Returns the client."""
        async with self._lock:
            await self._connected()
        return self

    async def close(self) -> None:
        """Closes the request connection (event streams have their own)."""
        async with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    async def _connected(self) -> _AsyncConnection:
        if self._connection is not None and (self._connection.broken or peer_closed(self._connection.sock)):
            self._connection.close()
            self._connection = None
        if self._connection is None:
            self._connection = await _AsyncConnection.open(self.path, self.connect_timeout, self.max_line)
        return self._connection

    async def call(self, call: Call[T], timeout: float | None = None) -> T:
        """Runs one request (see :mod:`huddle.protocol`) and returns its decoded result."""
        wait = timeout if timeout is not None else call.timeout if call.timeout is not None else self.timeout

        async def in_turn() -> T:
            async with self._lock:  # requests of one connection go one at a time
                connection = await self._connected()
                try:
                    return await connection.request(call)
                except ProtocolError:
                    connection.close()
                    self._connection = None
                    raise

        try:
            return await _within(in_turn(), wait)
        except _Timeout:
            raise TimeoutError(f"{call.op}: no reply from the Huddle node at {self.path} within {wait:g} s") from None

    async def request(self, op: str, fields: Mapping[str, Any] | None = None, *,
                      timeout: float | None = None) -> JSONObject:
        """Any request: the reply's result fields, or :class:`HuddleError`."""
        return await self.call(protocol.raw(op, fields), timeout)

    # MARK: operations (CONTROL.md, Operations): as huddle.Client's, awaited

    async def status(self, *, timeout: float | None = None) -> Status:
        """This node: its member and node ids, name, address, session, clocks, epoch… (:meth:`huddle.Client.status`)."""
        return await self.call(protocol.status(), timeout)

    async def members(self, *, timeout: float | None = None) -> list[Member]:
        """Every member this node knows (:meth:`huddle.Client.members`)."""
        return await self.call(protocol.members(), timeout)

    async def join(self, addr: str, *, timeout: float | None = None) -> int:
        """Joins the session through ``addr``; the count of members once joined (:meth:`huddle.Client.join`)."""
        return await self.call(protocol.join(addr), timeout)

    async def send(self, body: Body, *, to: Iterable[MemberRef] | None = None, reliable: bool = True,
                   timeout: float | None = None) -> Sent:
        return await self.call(protocol.send(body, to, reliable), timeout)

    def events(self, topics: Iterable[str] | None = None, since: int | None = None, *, resume: bool = True,
               timeout: float | None = None) -> AsyncEventStream:
        """The event stream of a subscription (see :meth:`huddle.Client.events`). It subscribes
        when entered (``async with``), started (:meth:`AsyncEventStream.start`) or first iterated;
        :meth:`subscribe` does both at once."""
        subscription = Subscription(topics=protocol.topic_list(topics), since=since, resume=resume)
        return AsyncEventStream(self.path, subscription, reply_timeout=self.timeout, event_timeout=timeout,
                                connect_timeout=self.connect_timeout, max_line=self.max_line)

    async def subscribe(self, topics: Iterable[str] | None = None, since: int | None = None, *, resume: bool = True,
                        timeout: float | None = None) -> AsyncEventStream:
        """:meth:`events`, subscribed before it returns."""
        return await self.events(topics, since, resume=resume, timeout=timeout).start()

    async def attach_add(self, path: str | os.PathLike[str], *, name: str | None = None, meta: Any = None,
                         timeout: float | None = None) -> Attachment:
        """Shares a file as an attachment, once chunked, stored and announced (:meth:`huddle.Client.attach_add`)."""
        return await self.call(protocol.attach_add(path, name, meta, timeout))

    async def attach_list(self, *, timeout: float | None = None) -> list[Attachment]:
        """Every attachment this node knows."""
        return await self.call(protocol.attach_list(), timeout)

    async def attach_get(self, attachment: AttachmentRef, path: str | os.PathLike[str], *, wait: bool = True,
                         timeout_ms: int | None = None, timeout: float | None = None) -> Fetched:
        """Writes the attachment's whole file to ``path`` (:meth:`huddle.Client.attach_get`)."""
        return await self.call(protocol.attach_get(attachment, path, wait, timeout_ms, timeout))

    async def attach_remove(self, attachment: AttachmentRef, *, timeout: float | None = None) -> None:
        """Removes an attachment from the session."""
        await self.call(protocol.attach_remove(attachment), timeout)

    async def activity_get(self, *, timeout: float | None = None) -> Activity:
        """The session's activity and who set it."""
        return await self.call(protocol.activity_get(), timeout)

    async def activity_set(self, value: Any, *, timeout: float | None = None) -> None:
        """Sets the session's activity (any JSON, ≤ 16 KiB serialized)."""
        await self.call(protocol.activity_set(value), timeout)

    async def stats(self, *, timeout: float | None = None) -> Stats:
        """The node's traffic and delivery counters."""
        return await self.call(protocol.stats(), timeout)

    async def remove(self, member: MemberRef, *, timeout: float | None = None) -> int:
        """Removes a member for good and rotates the session key; the new epoch."""
        return await self.call(protocol.remove(member), timeout)

    async def rekey(self, *, timeout: float | None = None) -> int:
        """Rotates the session key, removing nobody; the new epoch."""
        return await self.call(protocol.rekey(), timeout)

    async def diagnose(self, *, timeout: float | None = None) -> Diagnose:
        """The node's own checks as facts (:meth:`huddle.Client.diagnose`)."""
        return await self.call(protocol.diagnose(), timeout)

    async def invite(self, *, ttl_ms: int | None = None, uses: int | None = None,
                     timeout: float | None = None) -> Invite:
        """A one-time pairing code (:meth:`huddle.Client.invite`)."""
        return await self.call(protocol.invite(ttl_ms, uses), timeout)

    async def participant_join(self, activity: str, *, program: ParticipantRef | None = None,
                               timeout: float | None = None) -> Participant:
        """Makes this client's connection a participant of ``activity`` (:meth:`huddle.Client.participant_join`)."""
        return await self.call(protocol.participant_join(activity, program), timeout)

    async def participant_leave(self, program: ParticipantRef, *, timeout: float | None = None) -> None:
        """The participant ``program`` of this node is one no more (:meth:`huddle.Client.participant_leave`)."""
        await self.call(protocol.participant_leave(program), timeout)

    async def participants(self, *, activity: str | None = None, timeout: float | None = None) -> list[Participant]:
        """The participants this node shows (:meth:`huddle.Client.participants`)."""
        return await self.call(protocol.participants(activity), timeout)

    async def leave(self, *, timeout_ms: int | None = None, timeout: float | None = None) -> int:
        """Hands off chunks, then the node leaves, wipes its data and exits; the chunks handed off."""
        return await self.call(protocol.leave(timeout_ms, timeout))


class AsyncEventStream(AsyncIterator[AnyEvent]):
    """A subscription's events on a connection of its own (see :class:`huddle.EventStream`, whose
    behaviour it shares: resuming after ``overflow``, :attr:`cursor`, :meth:`get`)."""

    def __init__(self, path: str, subscription: Subscription, *, reply_timeout: float, event_timeout: float | None,
                 connect_timeout: float, max_line: int) -> None:
        self.path = path
        self._subscription = subscription
        self._reply_timeout = reply_timeout
        self._event_timeout = event_timeout
        self._connect_timeout = connect_timeout
        self._max_line = max_line
        self._connection: _AsyncConnection | None = None
        self._started = False
        self._closed = False

    def __repr__(self) -> str:
        return f"AsyncEventStream({self.path!r}, topics={self._subscription.topics}, cursor={self.cursor})"

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
        """The ``overflow`` events the node sent this stream."""
        return list(self._subscription.overflows)

    @property
    def ended(self) -> bool:
        """Whether the stream is over: closed, or overflowed with ``resume=False``."""
        return self._closed or self._subscription.ended

    async def start(self) -> AsyncEventStream:
        """Subscribes (once; later calls do nothing). Returns the stream."""
        if not self._started:
            self._started = True
            await self._subscribe()
        return self

    async def _subscribe(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        connection = await _AsyncConnection.open(self.path, self._connect_timeout, self._max_line)
        try:
            latest = await _within(connection.request(self._subscription.request()), self._reply_timeout)
        except _Timeout:
            connection.close()
            raise TimeoutError(f"subscribe: no reply from the Huddle node at {self.path} within {self._reply_timeout:g} s") from None
        except BaseException:
            connection.close()
            raise
        self._subscription.subscribed(latest)
        self._connection = connection

    async def get(self, timeout: float | None = None) -> AnyEvent | None:
        """The next event, or ``None`` when none came within ``timeout`` seconds (``None``: wait
        as long as the node is up) or the stream has ended."""
        await self.start()
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not self.ended:
            if self._connection is None:
                await self._subscribe()
            assert self._connection is not None
            try:
                obj = await _within(self._connection.read_object(), None if deadline is None else deadline - loop.time())
            except _Timeout:
                return None
            except (ConnectionClosed, ProtocolError):
                await self.close()
                raise
            event = self._subscription.event(obj)
            if isinstance(event, OverflowEvent):
                self._connection.close()
                self._connection = None
                if self._subscription.ended:
                    return event
                continue
            if event is not None:
                return event
        return None

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> AnyEvent:
        if self.ended:
            raise StopAsyncIteration
        event = await self.get(self._event_timeout)
        if event is None:
            if self.ended:
                raise StopAsyncIteration
            raise TimeoutError(f"no event from the Huddle node at {self.path} within {self._event_timeout:g} s")
        return event

    async def close(self) -> None:
        """Ends the subscription (closes its connection)."""
        self._closed = True
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def __aenter__(self) -> AsyncEventStream:
        return await self.start()

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.close()
