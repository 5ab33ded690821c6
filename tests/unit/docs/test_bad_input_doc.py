"""docs/bad-input.md is rendered from the table the integration test asserts; a stale page fails here."""

from __future__ import annotations

from tests.support.bad_input import CASES, DOC, SETTINGS, render


def test_bad_input_page_matches_the_table() -> None:
    assert DOC.read_text() == render(), "docs/bad-input.md is stale: run `.venv/bin/python -m tests.support.bad_input`"


def test_the_table_has_at_least_25_webserver_rows_and_unique_ids() -> None:
    ids = [c.id for c in CASES] + [s.id for s in SETTINGS]
    assert len(CASES) >= 25
    assert len(ids) == len(set(ids)), "row ids name namespaces and test ids: they must be unique"
    assert all(c.message for c in CASES) and all(s.message for s in SETTINGS)
