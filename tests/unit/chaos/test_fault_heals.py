"""Faults heal without blocking the harness's event loop, even when toxiproxy cannot remove a toxic (issue 21).

The fake toxiproxy never finishes a toxic removal (as toxiproxy v2.12.0 when a link's client went away, see
chaos/toxiproxy.py), so a fault whose heal removed toxics would hang here; a ``Ticker`` next to the fault proves the
loop kept running (the churn, the observers and the leader lookups share it during a real run).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator

import pytest

from chaos import faults, trust
from chaos.toxiproxy import Toxiproxy
from chaos.verdicts import Window
from tests.unit.chaos.fake_harness import FakeHarness
from tests.unit.chaos.fake_toxiproxy import FakeToxiproxy
from tests.unit.chaos.ticker import Ticker

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def proxies() -> AsyncIterator[tuple[FakeToxiproxy, Toxiproxy]]:
    async with FakeToxiproxy(proxy_stop=0.05) as fake, Toxiproxy(fake.url, call_timeout=5) as toxi:
        for slot in ("op-a", "op-b"):
            await toxi.add_proxy(slot, "127.0.0.1:6443")
        yield fake, toxi


async def test_sigterm_in_brownout_heals_and_the_loop_keeps_running_when_the_toxic_cannot_be_removed(
    proxies: tuple[FakeToxiproxy, Toxiproxy],
) -> None:
    fake, toxi = proxies
    h = FakeHarness(toxi, leader="op-b")
    w = Window("sigterm-brownout", "leader SIGTERMed during an API brownout", start=time.time())
    async with Ticker() as ticker:
        await asyncio.wait_for(faults.sigterm_in_brownout(h.as_harness(), w), 15)
    assert h.replicas["op-b"].signals == ["SIGTERM"] and h.replicas["op-a"].signals == []
    assert w.healed >= w.start
    assert re.search(r"it exited \d+\.\ds after the SIGTERM", w.notes[0]), w.notes
    assert fake.proxies["op-b"].toxics == [], "the leader's proxy is back without its latency"
    assert [p.name for p in fake.created].count("op-a") == 1, "the standby's proxy was left alone"
    assert not any(method == "DELETE" and "/toxics/" in path for method, path in fake.calls)
    assert ticker.longest_gap < 0.5, f"the event loop stalled for {ticker.longest_gap:.1f}s"
    assert ticker.ticks > 50  # the fault holds the latency 2s before the SIGTERM


async def test_slow_api_puts_3_to_6_s_per_call_on_both_replicas_then_heals_both(
    proxies: tuple[FakeToxiproxy, Toxiproxy],
) -> None:
    fake, toxi = proxies
    h = FakeHarness(toxi)
    w = Window("slow-api", "slow", start=time.time())
    latencies: dict[str, list[tuple[int, int]]] = {}

    async def watch() -> None:
        while not latencies:
            for name, proxy in fake.proxies.items():
                if len(proxy.toxics) == 2:
                    latencies[name] = [(t["attributes"]["latency"], t["attributes"]["jitter"]) for t in proxy.toxics]
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch())
    async with Ticker() as ticker:
        await trust.slow_api(h.as_harness(), w, hold=0.3)
    watcher.cancel()
    (each_way,) = set(next(iter(latencies.values())))
    low, high = 2 * (each_way[0] - each_way[1]), 2 * (each_way[0] + each_way[1])
    assert (low, high) == (3000, 6000), "a round trip (both directions) takes 3-6 s"
    assert all(p.toxics == [] for p in fake.proxies.values()) and len(fake.created) == 4
    assert w.healed and h.slack_at and ticker.longest_gap < 0.5


async def test_leader_freeze_thaws_once_the_standby_leads_and_a_lease_has_passed() -> None:
    h = FakeHarness(Toxiproxy("http://127.0.0.1:9"), leader="op-a", takeover=0.2)
    h.cfg.lease_duration = 0.4
    w = Window("leader-freeze", "freeze", start=time.time())
    await trust.leader_freeze(h.as_harness(), w)
    held = w.marks["thawed"] - w.marks["frozen"]
    assert h.replicas["op-a"].signals == ["SIGSTOP", "SIGCONT"] and h.replicas["op-b"].signals == []
    assert 0.6 <= held < 1.2, f"frozen for {held:.2f}s: at least 1.5 lease durations, once op-b led"
    assert w.extra["frozen replica"] == "op-a" and "op-b took the Lease" in w.notes[0]


async def test_leader_freeze_always_thaws_even_when_the_fault_is_cut_short() -> None:
    h = FakeHarness(Toxiproxy("http://127.0.0.1:9"), leader="op-a", takeover=60)
    h.cfg.lease_duration = 10
    w = Window("leader-freeze", "freeze", start=time.time())
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(trust.leader_freeze(h.as_harness(), w), 0.3)
    assert h.replicas["op-a"].signals == ["SIGSTOP", "SIGCONT"]
    assert w.steps[-1][1] == "thaw op-a (SIGCONT)"
