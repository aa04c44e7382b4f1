"""Fixtures of the web app tests: the site (API + pages) over the ``engine`` fixture."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from argon2 import PasswordHasher
from sqlalchemy import Engine

from conveyor.accounts import passwords
from tests.support.web import MakeSite, Site, build_site


@pytest.fixture
def make_site(engine: Engine, tmp_path: Path) -> MakeSite:
    """``make_site(run_workers=False, clock=None, **sections)``: alice, bob, and root (admin)."""

    def build(*, run_workers: bool = False, clock: Any = None, **sections: dict[str, Any]) -> Site:
        return build_site(engine, tmp_path, run_workers=run_workers, clock=clock, **sections)

    return build


@pytest.fixture(autouse=True)
def cheap_argon2(monkeypatch: pytest.MonkeyPatch) -> None:
    """argon2id at a small cost: the tests hash and check dozens of passwords on two cores.

    The production cost is proven by ``test_production_hasher_is_argon2id_at_full_cost``.
    """
    monkeypatch.setattr(
        passwords, "hasher", PasswordHasher(time_cost=1, memory_cost=8 * 1024, parallelism=1)
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium under Playwright, one per test module."""
    from playwright.sync_api import sync_playwright

    from tests.support.browser import FLAGS, ensure_chromium

    path = ensure_chromium()
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=path, args=FLAGS, headless=True)
        yield chromium
        chromium.close()
