"""The toxiproxy client against a fake server whose toxic removal wedges as toxiproxy v2.12.0's does (issue 21)."""

from __future__ import annotations

import asyncio
import time

import pytest

from chaos.toxiproxy import Toxiproxy, ToxiproxyError
from tests.unit.chaos.fake_toxiproxy import FakeToxiproxy
from tests.unit.chaos.ticker import Ticker

pytestmark = pytest.mark.timeout(30)


async def test_heal_recreates_the_proxy_without_waiting_for_a_wedged_toxic_removal_and_never_blocks_the_loop() -> None:
    async with FakeToxiproxy(proxy_stop=0.3) as fake, Toxiproxy(fake.url, call_timeout=5) as toxi:
        port = await toxi.add_proxy("op-b", "127.0.0.1:6443")
        await toxi.latency("op-b", ms=3000)
        # Another client's removal is stuck inside the server, holding the proxy's toxic list.
        stuck = asyncio.create_task(toxi._call("DELETE", "/proxies/op-b/toxics/latency-downstream", limit=20))
        await asyncio.sleep(0.1)
        async with Ticker() as ticker:
            started = time.monotonic()
            await toxi.heal("op-b")
            took = time.monotonic() - started
        stuck.cancel()
        assert took < 2, f"the heal took {took:.1f}s"
        # The deletion takes 0.3s in the fake: the loop must have ticked through it.
        assert ticker.ticks >= 10 and ticker.longest_gap < 0.2, f"the event loop stalled for {ticker.longest_gap:.1f}s"
        healed = fake.proxies["op-b"]
        assert (healed.listen, healed.upstream, healed.toxics) == (f"127.0.0.1:{port}", "127.0.0.1:6443", [])
        assert len(fake.created) == 2, "the proxy was deleted and created again"


async def test_heal_after_an_outage_gives_back_an_enabled_proxy_on_the_same_port() -> None:
    async with FakeToxiproxy() as fake, Toxiproxy(fake.url) as toxi:
        port = await toxi.add_proxy("op-a", "127.0.0.1:6443")
        await toxi.set_enabled("op-a", False)
        await toxi.heal_all()
        proxy = fake.proxies["op-a"]
        assert proxy.enabled and proxy.listen == f"127.0.0.1:{port}" and proxy.toxics == []


async def test_heal_deletes_again_when_the_name_is_still_taken() -> None:
    async with FakeToxiproxy() as fake, Toxiproxy(fake.url) as toxi:
        await toxi.add_proxy("op-a", "127.0.0.1:6443")
        original = toxi._delete

        async def delete_lost_once(name: str) -> None:
            toxi._delete = original  # type: ignore[method-assign]
            # the first delete is lost: the name stays taken and the create answers 409

        toxi._delete = delete_lost_once  # type: ignore[method-assign]
        await toxi.heal("op-a")
        assert [c for c in fake.calls if c[1] == "/proxies"] == [("POST", "/proxies")] * 3
        assert len(fake.created) == 2


async def test_a_call_the_server_never_answers_is_an_error_naming_the_call_within_its_limit() -> None:
    async with FakeToxiproxy(hang_add=True) as fake, Toxiproxy(fake.url, call_timeout=0.3) as toxi:
        await toxi.add_proxy("op-a", "127.0.0.1:6443")
        started = time.monotonic()
        with pytest.raises(ToxiproxyError, match=r"POST /proxies/op-a/toxics: no answer within 0.3s.*wedged"):
            await toxi.reset("op-a")
        assert time.monotonic() - started < 2


async def test_a_server_that_is_gone_is_an_error_that_says_so() -> None:
    async with FakeToxiproxy() as fake:
        url = fake.url
    async with Toxiproxy(url) as toxi:
        with pytest.raises(ToxiproxyError, match="is toxiproxy-server still running"):
            await toxi.version()
