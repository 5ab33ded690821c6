"""A TCP proxy between the operator and the API server that a test can freeze.

Why: "watch streams die silently" is the failure the stall watchdog exists for, and it cannot be produced by the
API server on demand. ``freeze()`` stops relaying server->client bytes on every connection open at that moment (the
connections stay open, nothing is closed: exactly a silent stall), while connections opened afterwards work normally,
so the operator recovers only if it notices the silence and reconnects. TLS passes through untouched.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field


@dataclass
class _Conn:
    client: socket.socket
    upstream: socket.socket
    frozen: threading.Event = field(default_factory=threading.Event)


class FreezableProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._conns: list[_Conn] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._upstream, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            conn = _Conn(client, upstream)
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._pump, args=(conn, client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(conn, upstream, client, True), daemon=True).start()

    def _pump(self, conn: _Conn, src: socket.socket, dst: socket.socket, downstream: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if downstream and conn.frozen.is_set():
                    # Frozen: swallow data and even the server's close, so the client sees pure silence.
                    if not data:
                        self._closed.wait()
                        return
                    continue
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def freeze(self) -> int:
        """Silence every connection open now; return how many."""
        with self._lock:
            for conn in self._conns:
                conn.frozen.set()
            return len(self._conns)

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for conn in self._conns:
                for sock in (conn.client, conn.upstream):
                    with contextlib.suppress(OSError):
                        sock.close()
