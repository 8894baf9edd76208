"""Real ``huddle run`` processes on loopback for the client's tests.

The binary is ``$HUDDLE_BIN``, else the repository's ``.build/release/huddle`` (``make
python-test`` passes the one it built). Every node gets its own control socket under a fresh
directory in /tmp (Unix socket paths are short), its own TMPDIR there (its temporary data
directory), and its log in a file; waits poll with generous deadlines, and teardown kills every
process a test started.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

from huddle import Client, EventStream, Member

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[3]
DEADLINE = 60.0
"""Seconds any wait on a node may take before the test fails (the machine may be loaded)."""


def huddle_binary() -> str:
    """The huddle executable under test."""
    return os.environ.get("HUDDLE_BIN") or str(REPO / ".build" / "release" / "huddle")


def wait_until(what: str, probe: Callable[[], T | None], timeout: float = DEADLINE, interval: float = 0.05,
               context: Callable[[], str] | None = None) -> T:
    """Polls ``probe`` until it returns something other than ``None``/``False``; fails the test
    naming ``what`` (and ``context()``, such as node logs) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = probe()
            if value is not None and value is not False:
                return value
        except (ConnectionError, OSError) as error:  # a node still starting
            last_error = error
        if time.monotonic() > deadline:
            more = f"\nlast error: {last_error!r}" if last_error else ""
            extra = f"\n{context()}" if context else ""
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}{more}{extra}")
        time.sleep(interval)


class Node:
    """One ``huddle run`` process."""

    def __init__(self, name: str, control: str, process: subprocess.Popen[bytes], log: Path) -> None:
        self.name = name
        self.control = control
        self.process = process
        self.log = log
        self.addr = ""
        self.member = ""
        self.node_key = ""

    def __repr__(self) -> str:
        return f"Node({self.name}, {self.member or '?'}, {self.addr or '?'})"

    def client(self, timeout: float = 30.0) -> Client:
        return Client(self.control, timeout=timeout)

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def alive_members(self) -> list[Member]:
        with self.client() as c:
            return [m for m in c.members() if m.state == "alive"]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


class Cluster:
    """Nodes of one session (one key file) started by one test or module."""

    def __init__(self, label: str) -> None:
        self.binary = huddle_binary()
        if not os.access(self.binary, os.X_OK):
            pytest.fail(f"no huddle executable at {self.binary}: build it (swift build -c release --product huddle) "
                        "or set HUDDLE_BIN")
        self.root = Path(tempfile.mkdtemp(prefix=f"hpy-{label[:6]}-", dir="/tmp"))
        (self.root / "tmp").mkdir()
        self.key = self.root / "session.key"
        self.nodes: list[Node] = []
        subprocess.run([self.binary, "keygen", "--out", str(self.key)], check=True, capture_output=True, timeout=30)

    def logs(self) -> str:
        return "\n".join(f"--- {n.name} ({n.log}):\n{n.log_text()[-3000:]}" for n in self.nodes)

    def start(self, name: str, *, join: Node | None = None, args: Sequence[str] = (), key: Path | None = None,
              use_key: bool = True) -> Node:
        """Starts a node and waits until it listens and answers ``status``."""
        control = str(self.root / f"{name}.sock")
        log = self.root / f"{name}.log"
        command = [self.binary, "run", "--listen", "127.0.0.1:0", "--name", name, "--control", control]
        if use_key:
            command += ["--key", str(key or self.key)]
        if join is not None:
            command += ["--join", join.addr]
        command += list(args)
        env = dict(os.environ, TMPDIR=str(self.root / "tmp"))
        env.pop("HUDDLE_CONTROL", None)
        with open(log, "wb") as out:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                       cwd=self.root)
        node = Node(name, control, process, log)
        self.nodes.append(node)

        def listening() -> str | None:
            if process.poll() is not None:
                pytest.fail(f"node {name} exited with {process.returncode}:\n{node.log_text()}")
            found = re.search(r" listening on (127\.0\.0\.1:\d+)", node.log_text())
            return found.group(1) if found else None

        node.addr = wait_until(f"{name} to listen", listening, context=self.logs)

        def answers() -> bool:
            with node.client(timeout=5) as c:
                status = c.status()
                node.member, node.node_key = status.member, status.node
                return True

        wait_until(f"{name}'s control socket to answer", answers, context=self.logs)
        return node

    def wait_alive(self, nodes: Sequence[Node], count: int) -> None:
        """Waits until each of ``nodes`` sees ``count`` alive members (itself included)."""
        for node in nodes:
            wait_until(f"{node.name} to see {count} alive members", lambda: len(node.alive_members()) == count,
                       context=self.logs)

    def shutdown(self) -> None:
        for node in self.nodes:
            node.kill()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A fresh session for one test (its nodes are killed after it)."""
    made = Cluster(request.node.name.replace("test_", ""))
    try:
        yield made
    finally:
        made.shutdown()


class Trio:
    """Three joined nodes shared by the tests of a session that do not change membership."""

    def __init__(self, cluster: Cluster, a: Node, b: Node, c: Node) -> None:
        self.cluster, self.a, self.b, self.c = cluster, a, b, c


@pytest.fixture(scope="session")
def trio() -> Iterator[Trio]:
    made = Cluster("trio")
    try:
        a = made.start("a")
        b = made.start("b", join=a)
        c = made.start("c", join=a)
        made.wait_alive([a, b, c], 3)
        yield Trio(made, a, b, c)
    finally:
        made.shutdown()


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A short-lived directory for files a test shares or fetches (absolute paths for the node)."""
    path = Path(tempfile.mkdtemp(prefix="hpy-files-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def flood(control: str, count: int, size: int, tag: str) -> None:
    """Sends ``count`` reliable messages of ``size`` bytes, ``f"{tag} {i:06d} "`` then padding, as
    fast as the node takes them (pipelined on one raw connection: a writer thread, replies read
    here), and checks every reply is ok."""
    import json
    import socket
    import threading

    lines = [(json.dumps({"op": "send", "text": f"{tag} {i:06d} ".ljust(size, "x")}) + "\n").encode() for i in range(count)]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(DEADLINE)
    sock.connect(control)
    failure: list[BaseException] = []

    def write() -> None:
        try:
            for line in lines:
                sock.sendall(line)
        except BaseException as error:  # reported below
            failure.append(error)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        replies = sock.makefile("rb")
        for i in range(count):
            reply = json.loads(replies.readline())
            assert reply.get("ok") is True, f"send {i} of the flood failed: {reply}"
    finally:
        writer.join(DEADLINE)
        sock.close()
    assert not failure, f"writing the flood failed: {failure[0]!r}"


E = TypeVar("E")


def take(stream: EventStream, kind: type[E], want: Callable[[E], bool], count: int = 1,
         timeout: float = DEADLINE) -> list[E]:
    """The first ``count`` events of type ``kind`` matching ``want`` from ``stream`` (others are
    skipped); fails the test after ``timeout`` seconds."""
    found: list[E] = []
    deadline = time.monotonic() + timeout
    while len(found) < count:
        left = deadline - time.monotonic()
        event = stream.get(timeout=max(left, 0))
        if event is None:
            pytest.fail(f"{len(found)} of {count} {kind.__name__} events came in {timeout:g} s (stream {stream})")
        if isinstance(event, kind) and want(event):
            found.append(event)
    return found


OVERFLOW_COUNT = 7000
OVERFLOW_SIZE = 6500
"""A flood that overflows a subscriber reading nothing: the node drops one that lags by more than
half of its retention (5,000 events and 32 MiB, CONTROL.md retains 10,000 and 64 MiB). Retention
counts the events as the node keeps them (frames: a message's body once, raw; about 6.6 KB each
here, 46 MB in all), not as JSON lines (about 2.3 times that, text and base64 body), and some
hundreds of the lines fit in the socket buffers and the node's window first."""
