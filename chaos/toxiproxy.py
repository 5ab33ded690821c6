"""A toxiproxy server between each operator replica and the API server: latency, resets, half-open connections.

Why toxiproxy: it is the well-kept tool made for exactly this (TCP-level toxics added and removed at run time over
an HTTP API), it passes TLS through untouched so the operator still verifies the API server's certificate, and one
proxy per replica lets a fault hit the leader alone. Built by ``chaos/tools.sh`` (version pinned in
``hack/versions.env``) and listening on 127.0.0.1 only.

The toxics used and what the operator sees:
- ``latency`` (both directions): slow API responses.
- ``reset_peer`` (timeout 0): every open connection, and every new one while the toxic stays, is reset (RST).
- ``timeout`` (timeout 0, both directions): data stops with no FIN, the half-open connection of a dead NAT or a
  cut cable; toxiproxy drops what is sent meanwhile and closes the connections when the toxic is removed.
- a disabled proxy: open connections are closed and new ones refused (the API is unreachable).

Used by ``faults`` and ``scenario``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class ToxiproxyError(RuntimeError):
    """The toxiproxy server could not be built, started or told something; the message says what."""


def toxiproxy_bin() -> Path:
    """The directory holding toxiproxy-server, built on demand (about a minute cold, instant when cached)."""
    build = subprocess.run([str(ROOT / "chaos" / "tools.sh"), "build"], capture_output=True, text=True, check=False)
    if build.returncode != 0:
        raise ToxiproxyError(f"chaos/tools.sh build failed:\n{build.stderr[-3000:]}")
    out = subprocess.run([str(ROOT / "chaos" / "tools.sh"), "bindir"], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Toxiproxy:
    """A running ``toxiproxy-server`` on 127.0.0.1 and its proxies; ``close()`` stops it."""

    def __init__(self, *, log_path: Path) -> None:
        self.port = free_port()
        binary = toxiproxy_bin() / "toxiproxy-server"
        self._log = log_path.open("ab")
        self.proc = subprocess.Popen(
            [str(binary), "-host", "127.0.0.1", "-port", str(self.port)],
            stdout=self._log,
            stderr=self._log,
            start_new_session=True,
        )
        deadline = time.monotonic() + 15
        while True:
            try:
                self._call("GET", "/version")
                break
            except ToxiproxyError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise ToxiproxyError(f"toxiproxy-server did not start; its log: {log_path}") from None
                time.sleep(0.1)
        self.proxies: dict[str, int] = {}

    def _call(self, method: str, path: str, body: Any = None, *, timeout: float = 10) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310
                text = resp.read().decode()
        except urllib.error.HTTPError as err:
            raise ToxiproxyError(f"toxiproxy {method} {path}: HTTP {err.code}: {err.read().decode()}") from err
        except OSError as err:
            raise ToxiproxyError(f"toxiproxy {method} {path}: {err}") from err
        return json.loads(text) if text.strip().startswith(("{", "[")) else text

    def add_proxy(self, name: str, upstream: str) -> int:
        """A proxy ``name`` on a free loopback port relaying to ``upstream`` (host:port); returns the port."""
        port = free_port()
        self._call("POST", "/proxies", {"name": name, "listen": f"127.0.0.1:{port}", "upstream": upstream})
        self.proxies[name] = port
        return port

    def add_toxic(self, proxy: str, toxic: str, kind: str, *, stream: str = "downstream", **attributes: int) -> None:
        body = {"name": toxic, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attributes}
        self._call("POST", f"/proxies/{proxy}/toxics", body)

    def remove_toxic(self, proxy: str, toxic: str, *, wait: float = 120.0) -> None:
        """Remove a toxic; idempotent (404 is success).

        toxiproxy removes a toxic link by link, draining what each link holds: with a latency toxic of seconds on
        dozens of watch connections that outlasts its API's own handler timeout (it answers 503 "Timeout") or ours,
        while the removal goes on in the server. So a timeout is followed by polling the proxy until the toxic is gone.
        """
        try:
            self._call("DELETE", f"/proxies/{proxy}/toxics/{toxic}", timeout=60)
            return
        except ToxiproxyError as err:
            if "HTTP 404" in str(err):
                return
            if "HTTP 503" not in str(err) and "timed out" not in str(err):
                raise
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            time.sleep(1)
            try:
                toxics = self._call("GET", f"/proxies/{proxy}/toxics", timeout=30)
            except ToxiproxyError:
                continue
            if toxic not in {t.get("name") for t in toxics or []}:
                return
        raise ToxiproxyError(f"toxiproxy: toxic {toxic} of proxy {proxy} still present {wait:.0f}s after its removal")

    def latency(self, proxy: str, *, ms: int, jitter: int = 0) -> None:
        for stream in ("upstream", "downstream"):
            self.add_toxic(proxy, f"latency-{stream}", "latency", stream=stream, latency=ms, jitter=jitter)

    def half_open(self, proxy: str) -> None:
        for stream in ("upstream", "downstream"):
            self.add_toxic(proxy, f"half-open-{stream}", "timeout", stream=stream, timeout=0)

    def reset(self, proxy: str) -> None:
        self.add_toxic(proxy, "reset", "reset_peer", stream="upstream", timeout=0)

    def set_enabled(self, proxy: str, enabled: bool) -> None:
        self._call("POST", f"/proxies/{proxy}", {"enabled": enabled})

    def heal(self, proxy: str) -> None:
        """Remove every toxic and enable the proxy again."""
        info = self._call("GET", f"/proxies/{proxy}")
        for toxic in info.get("toxics") or []:
            self.remove_toxic(proxy, toxic["name"])
        if not info.get("enabled", True):
            self.set_enabled(proxy, True)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()
