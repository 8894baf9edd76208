"""A typed Python client for a Huddle node's control socket (CONTROL.md, protocol v1).

::

    from huddle import Client, HuddleError

    with Client() as c:                       # $HUDDLE_CONTROL, $XDG_RUNTIME_DIR/huddle.sock, …
        print(c.status().member, [m.name for m in c.members()])
        c.send("hello")
        with c.events(topics=["messages"]) as stream:
            for event in stream:
                print(event.from_, event.text)

The asyncio client is :class:`huddle.aio.AsyncClient`, with the same methods.
"""

from .client import Client, EventStream
from .errors import (
    ConnectionClosed,
    ErrorCode,
    HuddleError,
    NodeNotRunning,
    ProtocolError,
    UntrustedSocket,
)
from .framing import default_control_path
from .models import (
    Activity,
    ActivityEvent,
    AnyEvent,
    Attachment,
    AttachmentEvent,
    ByteCounts,
    Diagnose,
    DiagnoseJoining,
    DiagnoseMember,
    Event,
    Fetched,
    GapEvent,
    Invite,
    Member,
    MemberEvent,
    MessageEvent,
    OverflowEvent,
    Participant,
    Sent,
    Stats,
    Status,
    UnknownEvent,
)

__version__ = "0.1.0"

__all__ = [
    "Activity",
    "ActivityEvent",
    "AnyEvent",
    "Attachment",
    "AttachmentEvent",
    "ByteCounts",
    "Client",
    "ConnectionClosed",
    "Diagnose",
    "DiagnoseJoining",
    "DiagnoseMember",
    "ErrorCode",
    "Event",
    "EventStream",
    "Fetched",
    "GapEvent",
    "HuddleError",
    "Invite",
    "Member",
    "MemberEvent",
    "MessageEvent",
    "NodeNotRunning",
    "OverflowEvent",
    "Participant",
    "ProtocolError",
    "Sent",
    "Stats",
    "Status",
    "UnknownEvent",
    "UntrustedSocket",
    "default_control_path",
]
