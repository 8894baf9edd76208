#!/usr/bin/env python3
"""Prints a Huddle session's member changes and attachment progress as they happen.

    python3 watch.py [--control PATH]

First the members and attachments the node knows now, then one line per change. Stop it with
Ctrl-C. Needs the client: pip install ./clients/python
"""

from __future__ import annotations

import argparse
import sys

from huddle import Attachment, AttachmentEvent, Client, Member, MemberEvent


def describe_member(member: Member) -> str:
    return f"{member.name} ({member.member}) at {member.addr}"


def describe_attachment(attachment: Attachment) -> str:
    percent = 100 * attachment.have // attachment.chunks if attachment.chunks else 100
    return (f"{attachment.name} ({attachment.id[:12]}, {attachment.size} bytes): "
            f"{attachment.have}/{attachment.chunks} chunks here ({percent}%), {attachment.state}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--control", help="the node's control socket (default: as the huddle CLI)")
    args = parser.parse_args()
    try:
        with Client(args.control) as client:
            # Subscribed first, then the snapshot: a change in between shows up as an event.
            with client.events(topics=["members", "attachments"]) as stream:
                for member in client.members():
                    print(f"member {describe_member(member)}: {member.state}")
                for attachment in client.attach_list():
                    print(f"attachment {describe_attachment(attachment)}")
                print(f"watching {client.path}", flush=True)
                for event in stream:
                    if isinstance(event, MemberEvent):
                        by = f" by {event.by}" if event.by else ""
                        print(f"member {describe_member(event.member)}: {event.change}{by}", flush=True)
                    elif isinstance(event, AttachmentEvent):
                        print(f"attachment {describe_attachment(event.attachment)} [{event.change}]", flush=True)
    except KeyboardInterrupt:
        return 0
    except ConnectionError as error:
        print(f"watch: {error}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
