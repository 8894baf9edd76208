"""The exceptions the Huddle client raises.

- :class:`HuddleError`: the node answered a request with an error reply (CONTROL.md); its
  ``code`` is one of the protocol's error codes (:class:`ErrorCode`).
- :class:`NodeNotRunning`, :class:`ConnectionClosed`, :class:`UntrustedSocket`: the node could
  not be reached, went away mid-request, or its socket path is not safe to trust. All three are
  :class:`ConnectionError`, and each names the control socket path.
- :class:`ProtocolError`: the node wrote something CONTROL.md does not allow.
- A reply that does not come in time raises the builtin :class:`TimeoutError`.
"""

from __future__ import annotations

from enum import Enum


class ErrorCode(str, Enum):
    """The error codes of CONTROL.md. ``HuddleError.code`` is a plain ``str`` (so a code added
    by a later node still arrives); it compares equal to these members, e.g.
    ``err.code == ErrorCode.TOO_LARGE``."""

    BAD_REQUEST = "bad_request"
    """Unparsable line, unknown op, missing or ill-typed field."""
    NOT_FOUND = "not_found"
    TOO_LARGE = "too_large"
    BUSY = "busy"
    """Backpressure did not clear in time: try again."""
    UNAVAILABLE = "unavailable"
    """No live holder, or the peer is unreachable."""
    TIMEOUT = "timeout"
    IO_ERROR = "io_error"
    NOT_MEMBER = "not_member"
    INTERNAL = "internal"


class HuddleError(Exception):
    """The node refused a request: ``{"ok": false, "error": {"code": …, "message": …}}``.

    Attributes:
        code: the protocol's error code (see :class:`ErrorCode`), as the node wrote it.
        message: the node's explanation.
        op: the request's op (``"send"``, ``"attach.get"``, …), when known.
    """

    def __init__(self, code: str, message: str, op: str | None = None) -> None:
        super().__init__(code, message, op)
        self.code = code
        self.message = message
        self.op = op

    def __str__(self) -> str:
        where = f"{self.op}: " if self.op else ""
        return f"{where}{self.code}: {self.message}"


class ProtocolError(Exception):
    """The node wrote something CONTROL.md does not allow (a line that is not a JSON object, a
    reply to another request, a missing or ill-typed field, a line above the client's limit).
    The connection it came on is closed."""


class NodeNotRunning(ConnectionError):
    """No node answers at the control socket path (nothing there, or a stale socket file)."""

    def __init__(self, path: str, reason: str = "") -> None:
        detail = f" ({reason})" if reason else ""
        super().__init__(f"no Huddle node is running at control socket {path}{detail}")
        self.path = path


class ConnectionClosed(ConnectionError):
    """The node closed the control connection before answering (it stopped, left or crashed).
    Whether the request was carried out is unknown."""

    def __init__(self, path: str, what: str = "") -> None:
        detail = f" {what}" if what else ""
        super().__init__(f"the Huddle node at {path} closed the control connection{detail}")
        self.path = path


class UntrustedSocket(ConnectionError):
    """The control socket path, or its directory, belongs to another user (or the directory is
    writable by others and not sticky): another user could pose as the node there, so the client
    does not connect (the same rule as the ``huddle`` CLI)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason)
        self.path = path
