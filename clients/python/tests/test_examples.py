"""examples/python, run as a user would: each script against real nodes, briefly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from conftest import REPO, Cluster, take, wait_until
from huddle import MessageEvent

EXAMPLES = REPO / "examples" / "python"


class Script:
    """A running example: its output lines, collected on a thread."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self.errors: list[str] = []
        threading.Thread(target=self._read, args=(process.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._read, args=(process.stderr, self.errors), daemon=True).start()

    @staticmethod
    def _read(stream: IO[str] | None, into: list[str]) -> None:
        for line in stream or ():
            into.append(line.rstrip("\n"))

    def wait_for(self, text: str) -> str:
        def printed() -> str | None:
            assert self.process.poll() is None, f"the script exited {self.process.returncode}: {self.lines} {self.errors}"
            return next((line for line in list(self.lines) if text in line), None)

        return wait_until(f"the script to print {text!r}", printed, context=lambda: "\n".join(self.lines + self.errors))


def _interruptible() -> None:
    """Runs in the child before the script: Ctrl-C (SIGINT) is delivered to it as at a terminal.

    A shell that starts a job in the background without job control (as CI, or `make test &`,
    may) starts it with SIGINT ignored, every child inherits that, and Python then installs no
    KeyboardInterrupt handler: the Ctrl-C below would be lost and the test would wait 30 s in vain.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def run(script: str, control: str) -> Iterator[Script]:
    process = subprocess.Popen([sys.executable, "-u", str(EXAMPLES / script), "--control", control],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
                               preexec_fn=_interruptible)
    try:
        yield Script(process)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            assert process.wait(timeout=30) == 0, "Ctrl-C stops it cleanly"
        finally:
            process.kill()


def test_chat_bot_answers(cluster: Cluster) -> None:
    a = cluster.start("alice")
    bot_node = cluster.start("bot", join=a)
    cluster.wait_alive([a, bot_node], 2)
    with run("chat_bot.py", bot_node.control) as bot, a.client() as c, c.events(topics=["messages"]) as inbox:
        bot.wait_for("ready")
        c.send("ping")
        c.send("members")
        replies = take(inbox, MessageEvent, lambda e: e.from_ == bot_node.member, 2)
        assert [r.text for r in replies] == ["pong", "2 alive: alice, bot"]
        assert all(r.to == [a.member] for r in replies), "answers go to the sender only"
        bot.wait_for("'members' -> '2 alive: alice, bot'")


def test_watch_prints_members_and_attachment_progress(cluster: Cluster, scratch: Path) -> None:
    a = cluster.start("alice")
    b = cluster.start("bob", join=a)
    cluster.wait_alive([a, b], 2)
    with run("watch.py", b.control) as watch:
        watch.wait_for("watching")
        assert any("member alice" in line and "alive" in line for line in watch.lines)
        carol = cluster.start("carol", join=a)
        watch.wait_for(f"carol ({carol.member}) at {carol.addr}: joined")
        (scratch / "song.ogg").write_bytes(os.urandom(600_000))
        with a.client() as c:
            c.attach_add(scratch / "song.ogg")
        watch.wait_for("song.ogg")
        done = watch.wait_for("3/3 chunks here (100%)")
        assert "song.ogg" in done and "600000 bytes" in done
