"""The toxiproxy-server process of a chaos run: built on demand, started on 127.0.0.1, stopped at the end.

Why apart from the API client (``toxiproxy``): the process is set up once per run and has to be found, built and
reaped; the client is what every fault uses, and its tests run against a fake server. Built by ``chaos/tools.sh``
(version pinned in ``hack/versions.env``); it listens on loopback only, its log goes to the run's work directory.

Used by ``harness``, which hands ``client`` on to the faults.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

from chaos.toxiproxy import Toxiproxy, ToxiproxyError, free_port
from harness.paths import ROOT


def toxiproxy_bin() -> Path:
    """The directory holding toxiproxy-server, built on demand (about a minute cold, instant when cached)."""
    build = subprocess.run([str(ROOT / "chaos" / "tools.sh"), "build"], capture_output=True, text=True, check=False)
    if build.returncode != 0:
        raise ToxiproxyError(f"chaos/tools.sh build failed (run it by hand to see why):\n{build.stderr[-3000:]}")
    out = subprocess.run([str(ROOT / "chaos" / "tools.sh"), "bindir"], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def _spawn(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        return subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)


class ToxiproxyServer:
    """A running ``toxiproxy-server``; ``client`` talks to it, ``close()`` stops both."""

    def __init__(self, proc: subprocess.Popen[bytes], client: Toxiproxy, log_path: Path) -> None:
        self.proc = proc
        self.client = client
        self.log_path = log_path

    @classmethod
    async def start(cls, *, log_path: Path, within: float = 15.0) -> ToxiproxyServer:
        binary = await asyncio.to_thread(toxiproxy_bin) / "toxiproxy-server"
        port = free_port()
        proc = await asyncio.to_thread(_spawn, [str(binary), "-host", "127.0.0.1", "-port", str(port)], log_path)
        client = Toxiproxy(f"http://127.0.0.1:{port}", log_hint=str(log_path))
        await client.__aenter__()
        server = cls(proc, client, log_path)
        deadline = time.monotonic() + within
        while True:
            try:
                await client.version()
                return server
            except ToxiproxyError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    await server.close()
                    raise ToxiproxyError(
                        f"toxiproxy-server did not answer within {within:.0f}s (exit code {proc.poll()}); "
                        f"its log: {log_path}"
                    ) from None
                await asyncio.sleep(0.1)

    async def close(self) -> None:
        await self.client.__aexit__(None, None, None)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                await asyncio.to_thread(self.proc.wait, 10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                await asyncio.to_thread(self.proc.wait, 10)
