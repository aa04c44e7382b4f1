"""Fixtures of the web app tests: the site (API + pages) over the ``engine`` fixture."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from argon2 import PasswordHasher
from fastapi import FastAPI
from sqlalchemy import Engine

from conveyor.accounts import add_user, create_token, passwords, set_admin, set_password
from conveyor.config import Settings
from conveyor.runtime import Runtime
from conveyor.testing import FakeClock
from conveyor.web import create_app

# The process's hasher before any test swaps it (see ``cheap_argon2``).
PRODUCTION_HASHER = passwords.hasher
PASSWORDS = {"alice": "alice-password-1", "bob": "bob-password-22", "root": "root-password-333"}


def build_settings(tmp_path: Path, **sections: dict[str, Any]) -> Settings:
    """Settings on ``tmp_path`` with no workers unless a section asks for them."""
    base: dict[str, dict[str, Any]] = {
        "storage": {"root": tmp_path / "data"},
        "pipeline": {"workers": 0, "poll_interval": 0.1, "retry_base": 0.2, "stop_grace": 10},
        "transcription": {"poll_delay": 0.3},
        "media": {"short_workers": 0, "long_workers": 0},
        "api": {"sse_heartbeat": 0.5},
    }
    for name, values in sections.items():
        base[name] = {**base.get(name, {}), **values}
    return Settings(**base)  # type: ignore[arg-type]


@dataclass
class Site:
    """The app, its runtime, and each user's API token."""

    runtime: Runtime
    app: FastAPI
    tokens: dict[str, str]


MakeSite = Callable[..., Site]


def build_site(
    engine: Engine,
    tmp_path: Path,
    *,
    run_workers: bool = False,
    clock: Any = None,
    **sections: dict[str, Any],
) -> Site:
    """The site on ``engine`` with three users: alice, bob, and root (an admin)."""
    runtime = Runtime(build_settings(tmp_path, **sections), clock, engine=engine)
    tokens = {}
    for name, password in PASSWORDS.items():
        add_user(engine, runtime.clock, name)
        set_password(engine, name, password)
        tokens[name] = create_token(engine, runtime.clock, name).token
    set_admin(engine, "root", True)
    return Site(runtime, create_app(runtime, run_workers=run_workers), tokens)


@pytest.fixture
def make_site(engine: Engine, tmp_path: Path) -> MakeSite:
    """``make_site(run_workers=False, clock=None, **sections)``: alice, bob, and root (admin)."""

    def build(*, run_workers: bool = False, clock: Any = None, **sections: dict[str, Any]) -> Site:
        return build_site(engine, tmp_path, run_workers=run_workers, clock=clock, **sections)

    return build


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(autouse=True)
def cheap_argon2(monkeypatch: pytest.MonkeyPatch) -> None:
    """argon2id at a small cost: the tests hash and check dozens of passwords on two cores.

    The production cost is proven by ``test_production_hasher_is_argon2id_at_full_cost``.
    """
    monkeypatch.setattr(
        passwords, "hasher", PasswordHasher(time_cost=1, memory_cost=8 * 1024, parallelism=1)
    )
