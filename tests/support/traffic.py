"""A bounded load generator inside a kind node: GET a NodePort one request after another, count what fails.

Why inside the node: the requests must take the path a client in the cluster's network takes (the node's own
address, kube-proxy's NodePort rules, the pods on every node), not a port forwarded to the host. So the generator is
a shell loop of ``curl`` run with ``<engine> exec`` in the node container: one new connection per request, each with
a connect timeout of 2 s and an answer timeout of 5 s. A request fails when it gets no answer in that time or an
answer other than 200; each failure is kept with its time and code (``000``: no answer), so a test can say when and
how it failed. The loop is bounded (``MAX_SECONDS``), stops when told to (a file in the node) and prints its counts
last. Used by tests/e2e/test_availability.py.
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from typing import Final

MAX_SECONDS: Final = 900
"""No load generator runs longer than this, whatever happens to the test that started it."""

_SCRIPT: Final = r"""
end=$((SECONDS + {max_seconds})); sent=0; failed=0
while ((SECONDS < end)) && [[ ! -e {stop} ]]; do
  code=$(curl -s -o /dev/null -w '%{{http_code}}' --connect-timeout 2 --max-time 5 "{url}")
  sent=$((sent + 1))
  if [[ "$code" != 200 ]]; then failed=$((failed + 1)); echo "failure $(date +%s.%N) $code"; fi
done
rm -f {stop}
echo "sent=$sent failed=$failed"
"""
_SUMMARY: Final = re.compile(r"^sent=(\d+) failed=(\d+)$", re.MULTILINE)
_FAILURE: Final = re.compile(r"^failure (\S+) (\d+)$", re.MULTILINE)


@dataclass(frozen=True)
class Tally:
    """What one load run saw: requests sent, failed, and each failure's (unix time, HTTP code; 000: no answer)."""

    sent: int
    failed: int
    seconds: float
    failures: tuple[tuple[float, str], ...] = field(default=())

    def codes(self) -> dict[str, int]:
        counted: dict[str, int] = {}
        for _, code in self.failures:
            counted[code] = counted.get(code, 0) + 1
        return counted

    def __str__(self) -> str:
        codes = ", ".join(f"{code}: {count}" for code, count in sorted(self.codes().items())) or "none"
        return f"sent {self.sent}, failed {self.failed} ({codes}) in {self.seconds:.0f} s"


class Load:
    """``with Load(engine, node, url) as load: ...``; ``load.tally`` once the block has left."""

    def __init__(self, engine: str, node: str, url: str) -> None:
        self._engine, self._node, self._url = engine, node, url
        self._stop = f"/tmp/load-stop-{uuid.uuid4().hex[:8]}"
        self._process: subprocess.Popen[str] | None = None
        self._started = 0.0
        self.tally: Tally | None = None

    def __enter__(self) -> Load:
        script = _SCRIPT.format(max_seconds=MAX_SECONDS, stop=self._stop, url=self._url)
        self._process = subprocess.Popen(
            [self._engine, "exec", self._node, "bash", "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._started = time.monotonic()
        time.sleep(1)  # a moment of steady traffic before the operation starts
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> Tally:
        """Stop the loop (after its request in flight) and count."""
        if self.tally is not None:
            return self.tally
        assert self._process is not None
        subprocess.run([self._engine, "exec", self._node, "touch", self._stop], check=False, timeout=30)
        out, err = self._process.communicate(timeout=30)
        summary = _SUMMARY.search(out)
        if summary is None:
            raise AssertionError(f"the load generator in {self._node} printed no counts: {out[-500:]} {err[-500:]}")
        failures = tuple((float(when), code) for when, code in _FAILURE.findall(out))
        self.tally = Tally(
            sent=int(summary.group(1)),
            failed=int(summary.group(2)),
            seconds=time.monotonic() - self._started,
            failures=failures,
        )
        return self.tally
