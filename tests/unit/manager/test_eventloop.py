"""The event loop choice: uvloop when installed, the standard library's loop when it is not or when asked, and a
clear stop when uvloop is required but missing; each choice actually runs the operator's coroutine on that loop."""

from __future__ import annotations

import asyncio
from types import ModuleType

import pytest
import uvloop

from webserver_operator.cli import build_parser
from webserver_operator.kube.errors import ConfigurationError
from webserver_operator.manager.configuration import SettingsError, load_settings
from webserver_operator.manager.eventloop import choose_loop, run


def _missing() -> ModuleType:
    raise ModuleNotFoundError("No module named 'uvloop'")


async def _loop_type() -> type[asyncio.AbstractEventLoop]:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop())


def test_auto_runs_on_uvloop_when_it_is_installed() -> None:
    choice = choose_loop("auto")
    assert choice.name == "uvloop"
    assert run(_loop_type(), choice) is uvloop.Loop
    assert choice.note.startswith("uvloop")


def test_auto_falls_back_to_the_standard_loop_without_uvloop() -> None:
    choice = choose_loop("auto", import_uvloop=_missing)
    assert choice.name == "asyncio"
    assert "uvloop is not available" in choice.note
    loop_type = run(_loop_type(), choice)
    assert loop_type.__module__.startswith("asyncio.")
    assert not issubclass(loop_type, uvloop.Loop)


def test_asyncio_is_the_standard_loop_even_with_uvloop_installed() -> None:
    choice = choose_loop("asyncio")
    assert choice.name == "asyncio"
    loop_type = run(_loop_type(), choice)
    assert loop_type.__module__.startswith("asyncio.")
    assert not issubclass(loop_type, uvloop.Loop)


def test_uvloop_required_but_missing_stops_with_what_to_do() -> None:
    with pytest.raises(ConfigurationError, match=r"webserver-operator\[uvloop\].*--event-loop=auto or asyncio"):
        choose_loop("uvloop", import_uvloop=_missing)


def test_uvloop_required_and_installed() -> None:
    assert run(_loop_type(), choose_loop("uvloop")) is uvloop.Loop


def test_setting_from_flag_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    parse = build_parser().parse_args
    assert load_settings(parse(["run"])).controller.event_loop == "asyncio"  # the default (issue 33's A/B)
    monkeypatch.setenv("WEBSERVER_OPERATOR_EVENT_LOOP", "asyncio")
    assert load_settings(parse(["run"])).controller.event_loop == "asyncio"
    assert load_settings(parse(["run", "--event-loop", "uvloop"])).controller.event_loop == "uvloop"
    with pytest.raises(SettingsError, match=r"event_loop \(--event-loop / WEBSERVER_OPERATOR_EVENT_LOOP\)"):
        load_settings(parse(["run", "--event-loop", "trio"]))
