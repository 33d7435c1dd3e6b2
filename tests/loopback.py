"""A real HTTP server on 127.0.0.1 (ephemeral port) for download tests; never another address."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackServer(ThreadingHTTPServer):
    """Counts requests per path in ``hits`` (under ``lock``) for the handler to update."""

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        super().__init__(("127.0.0.1", 0), handler)
        self.lock = threading.Lock()
        self.hits: dict[str, int] = {}

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


@contextmanager
def serving(server: LoopbackServer) -> Iterator[LoopbackServer]:
    """Serve in a background thread for the duration of the block, then shut down."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
