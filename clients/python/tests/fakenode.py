"""A scripted stand-in for a node's control socket, for what a real node cannot be made to do on
demand (late, wrong or broken replies) and for checking the client's resume logic line by line."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from typing import Any

Send = Callable[[Any], None]
Handler = Callable[[int, dict[str, Any], Send], bool | None]
"""``handler(connection_number, request, send)``: ``send`` writes a dict as a JSON line (or bytes
as they are); returning True closes the connection."""


class FakeNode:
    """Listens on ``path``; each connection (numbered from 0) is served on its own thread."""

    def __init__(self, path: str, handler: Handler) -> None:
        self.path = path
        self.handler = handler
        self.requests: list[tuple[int, dict[str, Any]]] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(16)
        self.connections: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        number = 0
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with self._lock:
                self.connections.append(conn)
            threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()
            number += 1

    def _serve(self, conn: socket.socket, number: int) -> None:
        def send(item: Any) -> None:
            data = item if isinstance(item, bytes) else (json.dumps(item) + "\n").encode()
            conn.sendall(data)

        try:
            with conn, conn.makefile("rb") as lines:
                for line in lines:
                    request = json.loads(line)
                    with self._lock:
                        self.requests.append((number, request))
                    if self.handler(number, request, send):
                        conn.shutdown(socket.SHUT_RDWR)
                        return
        except OSError:
            return

    def close(self) -> None:
        self.server.close()
        with self._lock:
            for conn in self.connections:
                try:
                    conn.close()
                except OSError:
                    pass


def ok(request: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A success reply to ``request``."""
    return {"id": request.get("id"), "ok": True, **fields}


def message(cursor: int, text: str) -> dict[str, Any]:
    """A ``message`` event line."""
    import base64

    return {"event": "message", "cursor": cursor, "msg": f"m-{cursor}", "from": "00000000000000aa", "seq": cursor,
            "deps": {}, "to": None, "reliable": True, "data": base64.b64encode(text.encode()).decode(), "text": text}
