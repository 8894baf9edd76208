"""The control protocol's framing (CONTROL.md, Transport), without I/O.

UTF-8 JSON, one object per line. A request has ``op`` and an ``id``; exactly one reply line
answers it, with the same ``id`` (``null`` when the node could not parse the line), and replies on
one connection come in request order. Event lines have an ``event`` key and no ``ok`` key.

The synchronous and the asyncio clients both frame with this module: they only move bytes.
"""

from __future__ import annotations

import json
import os
import socket
import stat
from collections import deque
from collections.abc import Mapping
from typing import Any

from .errors import HuddleError, ProtocolError, UntrustedSocket
from .models import JSONObject

MAX_REQUEST_LINE = 1 << 20
"""The longest request line a node reads (CONTROL.md: at most 1 MiB, newline excluded)."""

DEFAULT_MAX_LINE = 64 << 20
"""The longest reply or event line the client accepts by default (a message event of the default
64 KiB body limit is about 160 KiB; a large ``attach.list`` is the longest reply)."""

READ_SIZE = 256 << 10
"""How much one read from the socket takes at most."""


def default_control_path(environ: Mapping[str, str] | None = None) -> str:
    """The control socket path a node and the ``huddle`` CLI use by default: ``$HUDDLE_CONTROL``
    if set, else ``$XDG_RUNTIME_DIR/huddle.sock``, else ``/tmp/huddle-$UID.sock`` (empty
    variables count as unset, as in the CLI)."""
    env = os.environ if environ is None else environ
    path = env.get("HUDDLE_CONTROL")
    if path:
        return path
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime:
        return f"{runtime}/huddle.sock"
    return f"/tmp/huddle-{os.getuid()}.sock"


def resolve_control_path(path: str | os.PathLike[str] | None) -> str:
    """``path`` as a string, or the default path (:func:`default_control_path`) when it is
    ``None`` or empty."""
    if path is None:
        return default_control_path()
    text = os.fspath(path)
    return text if text else default_control_path()


def check_control_path(path: str) -> None:
    """Refuses a control socket another local user could stand in for, as the ``huddle`` CLI does:
    a directory owned by another user than this one or root, a directory writable by group or
    others without the sticky bit, or a path owned by another user than this one or root.

    Raises:
        UntrustedSocket: naming the path and why.
    """
    uid = os.geteuid()
    directory = os.path.dirname(path)
    if directory:
        try:
            info = os.stat(directory)
        except OSError:
            info = None
        if info is not None:
            if info.st_uid not in (uid, 0):
                raise UntrustedSocket(
                    path,
                    f"the control directory {directory} is owned by uid {info.st_uid}, not by this user "
                    f"(uid {uid}); refusing {path}",
                )
            if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
                raise UntrustedSocket(
                    path,
                    f"the control directory {directory} is writable by group or others and not sticky "
                    f"(mode {stat.S_IMODE(info.st_mode):o}); refusing {path}",
                )
    try:
        info = os.lstat(path)
    except OSError:
        return  # nothing there: connecting says so
    if info.st_uid not in (uid, 0):
        raise UntrustedSocket(path, f"{path} is owned by uid {info.st_uid}, not by this user (uid {uid}); refusing it")


def peer_closed(sock: socket.socket) -> bool:
    """Whether the node has closed this connection (it stopped or left since the last request):
    a look at the socket that neither waits nor takes anything from it."""
    saved = sock.gettimeout()
    sock.settimeout(0.0)  # a socket with a timeout would wait for data, MSG_DONTWAIT or not
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    finally:
        sock.settimeout(saved)


def encode_request(op: str, request_id: Any, fields: Mapping[str, Any]) -> tuple[bytes, Any]:
    """The request line for ``op`` with ``fields``, and the ``id`` its reply will carry.

    The request's ``id`` is ``request_id``, except for a request that has an ``id`` field of its
    own: ``attach.get`` and ``attach.remove`` name the attachment with ``id``, the same key
    CONTROL.md gives the request id, so such a request is sent with that ``id`` once, and its
    reply carries it back.

    Raises:
        HuddleError: ``bad_request`` when the line would be longer than a node reads
            (:data:`MAX_REQUEST_LINE`), as the node itself would answer; nothing is sent then.
        TypeError, ValueError: when a field is not JSON (or is a non-finite number).
    """
    request: dict[str, Any] = {"op": op, "id": request_id}
    for key, value in fields.items():
        if key == "op":
            raise ValueError("request field 'op' is set by the client")
        request[key] = value
    line = json.dumps(request, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    if len(line) > MAX_REQUEST_LINE:
        raise HuddleError(
            "bad_request",
            f"the request line is {len(line)} bytes; a node reads at most {MAX_REQUEST_LINE} (not sent)",
            op,
        )
    return line + b"\n", request["id"]


def decode_line(line: bytes) -> JSONObject:
    """The JSON object of one line from the node.

    Raises:
        ProtocolError: when it is not UTF-8 JSON, or not an object.
    """
    try:
        value = json.loads(line)
    except (UnicodeDecodeError, ValueError) as error:
        raise ProtocolError(f"the node wrote a line that is not JSON ({error}): {line[:200]!r}") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"the node wrote a JSON line that is not an object: {line[:200]!r}")
    return value


def is_event(obj: JSONObject) -> bool:
    """Whether a line is an event (an ``event`` key and no ``ok`` key) rather than a reply."""
    return "event" in obj and "ok" not in obj


def reply_result(obj: JSONObject, op: str) -> JSONObject:
    """The result fields of a reply (without ``id`` and ``ok``).

    Raises:
        HuddleError: for an error reply, with its code and message.
        ProtocolError: for a line that is not a reply.
    """
    ok = obj.get("ok")
    if ok is True:
        return {key: value for key, value in obj.items() if key not in ("id", "ok")}
    if ok is False:
        error = obj.get("error")
        if isinstance(error, dict) and isinstance(error.get("code"), str):
            message = error.get("message")
            return_message = message if isinstance(message, str) else ""
            raise HuddleError(error["code"], return_message, op)
        raise ProtocolError(f"the node's error reply to {op} has no error code: {obj!r}")
    raise ProtocolError(f"the node's reply to {op} has no \"ok\": {str(obj)[:200]}")


class LineBuffer:
    """Splits the bytes read from a connection into lines, holding at most ``max_line`` bytes of an
    unfinished line (a longer one is a :class:`ProtocolError`: the connection must be closed)."""

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.max_line = max_line
        self._pending = bytearray()
        self._lines: deque[bytes] = deque()

    def feed(self, data: bytes) -> None:
        """Adds bytes read from the connection."""
        start = 0
        while True:
            newline = data.find(b"\n", start)
            if newline < 0:
                break
            if self._pending:
                self._pending += data[start:newline]
                line = bytes(self._pending)
                self._pending.clear()
            else:
                line = data[start:newline]
            if len(line) > self.max_line:
                raise ProtocolError(f"the node wrote a line of {len(line)} bytes; the client's limit is {self.max_line}")
            if line.endswith(b"\r"):
                line = line[:-1]
            if line.strip():
                self._lines.append(line)
            start = newline + 1
        self._pending += data[start:]
        if len(self._pending) > self.max_line:
            size = len(self._pending)
            self._pending.clear()
            raise ProtocolError(f"the node wrote a line of more than {size} bytes; the client's limit is {self.max_line}")

    def next_line(self) -> bytes | None:
        """The next whole line, or ``None`` until more bytes come."""
        return self._lines.popleft() if self._lines else None

    @property
    def has_partial(self) -> bool:
        """Whether part of a line is waiting for the rest."""
        return bool(self._pending)


class ReplyMatcher:
    """Matches replies to requests on one connection by ``id`` (CONTROL.md: exactly one reply per
    request, with the same ``id``, in request order).

    Each request sent is known by a token (:meth:`next_token`) and the ``id`` its reply must
    carry. A request whose caller gave up (a timeout) is *abandoned*: its reply, when it comes, is
    dropped, and the connection goes on serving the next requests.
    """

    def __init__(self) -> None:
        self._next = 1
        self._outstanding: deque[list[Any]] = deque()  # [token, expected id, abandoned], in send order

    def next_token(self) -> int:
        """A fresh token, also the request id of a request without an ``id`` field of its own."""
        token = self._next
        self._next += 1
        return token

    def sent(self, token: int, expected_id: Any) -> None:
        """The request ``token``, whose reply must carry ``expected_id``, was written whole."""
        self._outstanding.append([token, expected_id, False])

    def abandon(self, token: int) -> None:
        """Nobody waits for the reply to request ``token`` any more."""
        for entry in self._outstanding:
            if entry[0] == token:
                entry[2] = True

    @property
    def outstanding(self) -> int:
        """Requests sent whose reply has not come (abandoned ones included)."""
        return len(self._outstanding)

    def match(self, reply: JSONObject) -> int | None:
        """The token of the request a reply answers, or ``None`` when it answers an abandoned one.

        Raises:
            ProtocolError: a reply when no request is outstanding, or with another id than the
                oldest outstanding request's (``null`` is accepted: the node could not parse it).
        """
        if not self._outstanding:
            raise ProtocolError(f"the node sent a reply to no request: {str(reply)[:200]}")
        token, expected, abandoned = self._outstanding.popleft()
        got = reply.get("id")
        if got is not None and (got != expected or isinstance(got, bool) != isinstance(expected, bool)):
            raise ProtocolError(f"the node answered request id {got!r} when {expected!r} was next")
        return None if abandoned else int(token)
