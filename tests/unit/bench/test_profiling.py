"""py-spy's collapsed stacks reduced to own and inclusive time per function and package."""

from bench.profiling import analyse_collapsed, profile_stem

ROOT = 'process 1:"python";thread (0x1);_run (asyncio/events.py:80)'
RECONCILE = "reconcile (/r/webserver_operator/reconcile/reconciler.py:120)"
STACKS = "\n".join(
    [
        f"{ROOT};{RECONCILE};loads (/usr/lib/python3.11/json/__init__.py:346) 6",
        f"{ROOT};{RECONCILE} 2",
        f"{ROOT};validate (/v/site-packages/pydantic/main.py:700) 2",
    ]
)


def test_own_inclusive_and_package_shares() -> None:
    result = analyse_collapsed(STACKS)
    assert result["samples"] == 10
    assert result["own_pct"][0] == ("loads (json/__init__.py)", 60.0)
    inclusive = dict(result["inclusive_pct"])
    assert inclusive["_run (asyncio/events.py)"] == 100.0
    assert inclusive["reconcile (webserver_operator/reconcile/reconciler.py)"] == 80.0
    packages = dict(result["package_own_pct"])
    assert packages["pydantic"] == 20.0
    assert packages["webserver_operator/reconcile"] == 20.0
    assert packages["json (stdlib)"] == 60.0


def test_output_names_carry_size_and_tag_so_a_new_profile_never_replaces_an_old_one() -> None:
    assert profile_stem(1000, "2026-11-24-abc1234") == "n1000-2026-11-24-abc1234"
    assert profile_stem(1000, "") == "n1000"  # the names of profiles made before tags existed
    assert profile_stem(1000, "a") != profile_stem(1000, "b")
