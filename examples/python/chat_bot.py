#!/usr/bin/env python3
"""A chat bot for a Huddle session: answers every text message sent to the session.

    python3 chat_bot.py [--control PATH]

"ping" gets "pong", "members" the names of the members alive, anything else is echoed back.
Each answer goes to the sender only (a directed message). Stop it with Ctrl-C.
Needs the client: pip install ./clients/python
"""

from __future__ import annotations

import argparse
import sys

from huddle import Client, HuddleError, MessageEvent


def answer(text: str, client: Client) -> str:
    """The bot's reply to ``text``."""
    command = text.strip().lower()
    if command == "ping":
        return "pong"
    if command == "members":
        names = sorted(m.name for m in client.members() if m.state == "alive")
        return f"{len(names)} alive: {', '.join(names)}"
    return f"you said: {text}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--control", help="the node's control socket (default: as the huddle CLI)")
    args = parser.parse_args()
    try:
        with Client(args.control) as client:
            me = client.status().member
            # Subscribed before saying "ready": nothing sent after this line is missed.
            with client.events(topics=["messages"]) as stream:
                print(f"chat bot {me} ready on {client.path}", flush=True)
                for event in stream:
                    if not isinstance(event, MessageEvent) or event.from_ == me or event.text is None:
                        continue
                    reply = answer(event.text, client)
                    try:
                        client.send(reply, to=[event.from_])
                    except HuddleError as error:  # the sender left meanwhile, or the node is busy
                        print(f"could not answer {event.from_}: {error}", file=sys.stderr, flush=True)
                        continue
                    print(f"{event.from_}: {event.text!r} -> {reply!r}", flush=True)
    except KeyboardInterrupt:
        return 0
    except ConnectionError as error:
        print(f"chat_bot: {error}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
