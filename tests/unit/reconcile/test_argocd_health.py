"""The Argo CD health check in docs/status.md, run as written (Lua 5.1, as Argo CD's gopher-lua) on real statuses."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import lupa.lua51 as lua51
import pytest

from tests.unit.reconcile.test_kstatus import CASES

DOC = Path(__file__).resolve().parents[3] / "docs" / "status.md"
EXPECTED = {
    "Creating": "Progressing",
    "Scaling": "Progressing",
    "RollingOut": "Progressing",
    "Conflict": "Degraded",
    "Ready": "Healthy",
}


def health(obj: dict[str, Any]) -> dict[str, str]:
    (script,) = re.findall(r"```lua\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    runtime = lua51.LuaRuntime()
    check = runtime.eval(f"function(obj)\n{script}\nend")
    result = check(runtime.table_from(obj, recursive=True))
    return {key: str(value) for key, value in dict(result).items()}


@pytest.mark.parametrize("case", list(EXPECTED))
def test_argocd_health(case: str) -> None:
    obj, _ = CASES[case]
    verdict = health(obj)
    assert verdict["status"] == EXPECTED[case], verdict
    assert verdict["message"]


def test_a_new_generation_is_progressing_until_observed() -> None:
    ready, _ = CASES["Ready"]
    assert health({**ready, "metadata": {**ready["metadata"], "generation": 3}})["status"] == "Progressing"
